import IMCore
import XCTest

@testable import HookRuntime

/// `ctx.t` and `ctx.locale` on real locale files, real Lua and a real state store.
final class LocaleTests: XCTestCase {
    /// A single-file plugin that answers every message with `ctx.t` of the message's text as key (vars
    /// from `msg.attrs.vars`, options from `msg.attrs.opts`).
    private func fixture(extra: String = "") -> Fixture {
        let f = Fixture()
        f.write(
            "greet.lua",
            #"""
            return { name = "greet",
              on_receive = function(msg, ctx)
                \#(extra)
                ctx.reply(ctx.t(msg.text, msg.attrs.vars, msg.attrs.opts))
              end,
              on_member_joined = function(ev, ctx) ctx.reply(ctx.t("welcome", { name = ev.members[1] })) end,
            }
            """#)
        f.write(
            "locales/greet/en.toml",
            #"""
            hello = "Hello, {name}!"
            only_en = "English only"
            braces = "{{literal}} and {name}"
            welcome = "Welcome, {name}!"

            [mod]
            warned = "{user} was warned: {reason}"

            [apples]
            one = "{count} apple"
            other = "{count} apples"
            """#)
        f.write(
            "locales/greet/zh-CN.toml",
            #"""
            hello = "你好，{name}！"
            welcome = "欢迎 {name} 🎉"
            mod.warned = "{user} 被警告：{reason}"
            apples.other = "{count} 个苹果"
            """#)
        f.write("locales/greet/zh-Hant.toml", #"hello = "妳好，{name}！""#)
        return f
    }

    private func reply(_ engine: PluginEngine, _ text: String, from: String = "Tom", cid: String = "c1", attrs: [String: JSONValue] = [:])
        -> String?
    {
        let r = engine.receive(msg(text, cid: cid, from: from, attrs: attrs))
        XCTAssertEqual(r.errors, [], text)
        return sentTexts(r.actions).first
    }

    func testLookupPlaceholdersNestedKeysAndPlurals() {
        let f = fixture()
        let engine = f.runtime()
        XCTAssertEqual(engine.loadAll().errors, [])
        XCTAssertEqual(reply(engine, "hello", attrs: ["vars": ["name": "Tom"]]), "Hello, Tom!")
        XCTAssertEqual(reply(engine, "mod.warned", attrs: ["vars": ["user": "Tom", "reason": "spam"]]), "Tom was warned: spam")
        XCTAssertEqual(reply(engine, "braces", attrs: ["vars": ["name": "x"]]), "{literal} and x")
        // a missing variable stays visible, a missing key is the key itself (never an error)
        XCTAssertEqual(reply(engine, "hello"), "Hello, {name}!")
        XCTAssertEqual(reply(engine, "no.such.key"), "no.such.key")
        XCTAssertEqual(reply(engine, "apples", attrs: ["vars": ["count": 1]]), "1 apple")
        XCTAssertEqual(reply(engine, "apples", attrs: ["vars": ["count": 3]]), "3 apples")
        XCTAssertEqual(reply(engine, "apples", attrs: ["vars": ["count": 0]]), "0 apples")
        XCTAssertEqual(reply(engine, "apples", attrs: ["vars": ["count": 2.5]]), "2.5 apples")
        // Chinese has one form: `other` serves every count
        let zh: JSONValue = ["locale": "zh-CN"]
        XCTAssertEqual(reply(engine, "apples", attrs: ["vars": ["count": 1], "opts": zh]), "1 个苹果")
        XCTAssertEqual(reply(engine, "mod.warned", attrs: ["vars": ["user": "小明", "reason": "刷屏"], "opts": zh]), "小明 被警告：刷屏")
    }

    func testFallbackChainAndForcedLocale() {
        let f = fixture()
        let engine = f.runtime()
        engine.loadAll()
        func forced(_ tag: String, _ key: String = "hello") -> String? {
            reply(engine, key, attrs: ["vars": ["name": "Tom"], "opts": ["locale": .string(tag)]])
        }
        XCTAssertEqual(forced("zh-CN"), "你好，Tom！")
        XCTAssertEqual(forced("zh_cn"), "你好，Tom！")
        XCTAssertEqual(forced("zh-Hant-TW"), "妳好，Tom！") // zh-Hant-TW → zh-Hant
        XCTAssertEqual(forced("zh-TW"), "妳好，Tom！") // a Traditional region implies zh-Hant
        // zh-Hant lacks it, there is no zh.toml: another Chinese file comes before the default locale
        XCTAssertEqual(forced("zh-HK", "welcome"), "欢迎 Tom 🎉")
        XCTAssertEqual(forced("zh", "welcome"), "欢迎 Tom 🎉")
        XCTAssertEqual(forced("zh-CN", "only_en"), "English only") // → default locale
        XCTAssertEqual(forced("fr"), "Hello, Tom!") // no file → default
        XCTAssertEqual(forced("zh-CN", "nothing"), "nothing") // → the key
        let r = engine.receive(msg("hello", attrs: ["opts": ["locale": "not a tag!"]]))
        XCTAssertEqual(r.errors.first?.message.contains("ctx.t: 'not a tag!' is not a locale tag"), true, "\(r.errors)")
    }

    func testMemberChoiceMessageAttrsConversationAndDefault() throws {
        let f = fixture(
            extra: #"""
                if msg.text == "!lang" then
                  local tag, err = ctx.locale.set_user(msg.from, msg.attrs.tag)
                  return ctx.reply(tostring(tag) .. " " .. tostring(err))
                elseif msg.text == "!lang conv" then
                  return ctx.reply(tostring(ctx.locale.set_conv(msg.cid, msg.attrs.tag)))
                elseif msg.text == "current" then
                  local tag, from = ctx.locale.current(msg.attrs.opts)
                  return ctx.reply(tag .. " " .. from)
                end
                """#)
        let engine = f.runtime()
        engine.loadAll()
        let hi: [String: JSONValue] = ["vars": ["name": "Tom"]]
        // nothing chosen: the default locale
        XCTAssertEqual(reply(engine, "hello", attrs: hi), "Hello, Tom!")
        XCTAssertEqual(reply(engine, "current"), "en default")
        // the client declares the member's language on the message
        XCTAssertEqual(reply(engine, "hello", attrs: hi.merging(["lang": "zh-CN"]) { $1 }), "你好，Tom！")
        XCTAssertEqual(reply(engine, "hello", attrs: hi.merging(["locale": "zh_TW"]) { $1 }), "妳好，Tom！")
        XCTAssertEqual(reply(engine, "current", attrs: ["lang": "zh-CN"]), "zh-CN message")
        // a moderator sets the conversation's locale: everyone there without a choice of their own gets it
        XCTAssertEqual(reply(engine, "!lang conv", attrs: ["tag": "zh-CN"]), "zh-CN")
        XCTAssertEqual(reply(engine, "hello", from: "Jerry", attrs: ["vars": ["name": "Jerry"]]), "你好，Jerry！")
        XCTAssertEqual(reply(engine, "hello", cid: "c2", attrs: hi), "Hello, Tom!")
        // Tom chooses English for himself (persisted), which beats the conversation and his client's attrs
        XCTAssertEqual(reply(engine, "!lang", attrs: ["tag": "EN"]), "en nil")
        XCTAssertEqual(reply(engine, "hello", attrs: hi), "Hello, Tom!")
        XCTAssertEqual(reply(engine, "hello", attrs: hi.merging(["lang": "zh-CN"]) { $1 }), "Hello, Tom!")
        XCTAssertEqual(reply(engine, "current"), "en member")
        XCTAssertEqual(reply(engine, "current", attrs: ["opts": ["user": "Jerry"]]), "zh-CN conversation")
        XCTAssertEqual(reply(engine, "!lang", attrs: ["tag": "klingon!"]), "nil 'klingon!' is not a locale tag (en, zh-CN, zh-Hant …)")
        XCTAssertEqual(try f.store.get(plugin: "hookbot.locale", key: "user:Tom", now: 0), "en")
        // the choice survives a restart of the bot (a fresh engine on the same state)
        engine.shutdown()
        let again = f.runtime()
        again.loadAll()
        XCTAssertEqual(reply(again, "hello", cid: "c2", attrs: hi.merging(["lang": "zh-CN"]) { $1 }), "Hello, Tom!")
        XCTAssertEqual(reply(again, "hello", from: "Jerry", attrs: ["vars": ["name": "Jerry"]]), "你好，Jerry！")
        // clearing the choice: the message's attrs count again
        XCTAssertEqual(reply(again, "!lang"), "true nil")
        XCTAssertEqual(reply(again, "hello", cid: "c2", attrs: hi.merging(["lang": "zh-CN"]) { $1 }), "你好，Tom！")
        // another default locale for the bot
        XCTAssertTrue(again.setDefaultLocale("zh-CN"))
        XCTAssertFalse(again.setDefaultLocale("??"))
        XCTAssertEqual(reply(again, "hello", cid: "c2", attrs: hi), "你好，Tom！")
        // the chain ends at the default locale: English is no longer in it
        XCTAssertEqual(reply(again, "only_en", cid: "c2"), "only_en")
    }

    func testMembershipEventsUseTheJoinersLocale() throws {
        let f = fixture()
        try f.store.set(plugin: "hookbot.locale", key: "user:小明", value: "zh-CN", now: 0)
        let engine = f.runtime()
        engine.loadAll()
        XCTAssertEqual(sentTexts(engine.memberJoined(cid: "c1", members: ["小明"]).actions), ["欢迎 小明 🎉"])
        XCTAssertEqual(sentTexts(engine.memberJoined(cid: "c1", members: ["Tom"]).actions), ["Welcome, Tom!"])
        // several joiners at once: the conversation's locale (here the default)
        XCTAssertEqual(sentTexts(engine.memberJoined(cid: "c1", members: ["小明", "Tom"]).actions), ["Welcome, 小明!"])
    }

    func testBadLocaleFilesFailTheLoadWithFileAndLine() {
        let f = fixture()
        let engine = f.runtime()
        XCTAssertEqual(engine.loadAll().errors, [])
        // a syntax error: the old version keeps running, the error names file and line
        f.write("locales/greet/zh-CN.toml", "hello = \"你好\"\n\nbroken = \n")
        var report = engine.sync()
        XCTAssertEqual(report.errors.count, 1)
        let syntax = report.errors.first?.description ?? ""
        XCTAssertTrue(syntax.contains("plugins/locales/greet/zh-CN.toml:3"), syntax)
        XCTAssertEqual(reply(engine, "hello", attrs: ["vars": ["name": "Tom"], "lang": "zh-CN"]), "你好，Tom！")
        // a value that is not text: file, line and key
        f.write("locales/greet/zh-CN.toml", "hello = \"你好\"\n[mod]\nwarned = 3\n")
        report = engine.sync()
        let typed = report.errors.first?.description ?? ""
        XCTAssertTrue(typed.contains("zh-CN.toml:3") && typed.contains("mod.warned") && typed.contains("must be a string"), typed)
        // a file name that is not a locale
        f.write("locales/greet/zh-CN.toml", "hello = \"你好，{name}！\"\n")
        f.write("locales/greet/chinese!.toml", "x = \"y\"\n")
        report = engine.sync()
        XCTAssertTrue((report.errors.first?.description ?? "").contains("'chinese!' is not a locale tag"), "\(report.errors)")
        f.remove("locales/greet/chinese!.toml")
        // fixed: it loads and the new text is used at once (hot reload re-reads the locale files)
        report = engine.sync()
        XCTAssertEqual(report.errors, [])
        XCTAssertEqual(report.reloaded, ["greet"])
        XCTAssertEqual(reply(engine, "hello", attrs: ["vars": ["name": "Tom"], "lang": "zh-CN"]), "你好，Tom！")
        XCTAssertEqual(reply(engine, "welcome", attrs: ["vars": ["name": "Tom"], "lang": "zh-CN"]), "Welcome, Tom!")
        // a missing locale directory is fine
        f.remove("locales")
        report = engine.sync()
        XCTAssertEqual(report.errors, [])
        XCTAssertEqual(reply(engine, "hello", attrs: ["vars": ["name": "Tom"]]), "hello")
    }

    func testFolderPluginsAndTheLocalesFolderIsNoPlugin() {
        let f = Fixture()
        f.write(
            "poll/init.lua",
            #"return { on_receive = function(msg, ctx) ctx.reply(ctx.t("vote", { n = 2 })) end }"#)
        f.write("poll/locales/en.toml", #"vote = "{n} votes""#)
        f.write("poll/locales/zh-CN.toml", #"vote = "{n} 票""#)
        // even with an init.lua, `locales/` is never taken for a plugin
        f.write("locales/init.lua", "return {}")
        let engine = f.runtime()
        let report = engine.loadAll()
        XCTAssertEqual(report.errors, [])
        XCTAssertEqual(engine.plugins.map(\.name), ["poll"])
        XCTAssertEqual(reply(engine, "x"), "2 votes")
        XCTAssertEqual(reply(engine, "x", attrs: ["lang": "zh-CN"]), "2 票")
    }

    func testWarningsForKeysTheDefaultLocaleLacks() {
        let f = fixture()
        f.write("locales/greet/zh-CN.toml", "hello = \"你好\"\nextra = \"多余\"\n[apples]\none = \"一个\"\n")
        let engine = f.runtime()
        engine.loadAll()
        XCTAssertEqual(
            engine.localeWarnings,
            ["plugins/locales/greet/zh-CN.toml: key extra not in plugins/locales/greet/en.toml (the default locale en)"])
        engine.setDefaultLocale("fr")
        XCTAssertEqual(engine.localeWarnings.count, 1)
        XCTAssertTrue(engine.localeWarnings[0].contains("no file for the default locale fr"), engine.localeWarnings[0])
    }

    func testTagsAndChains() {
        XCTAssertEqual(LocaleTag.normalise("zh_hant_tw"), "zh-Hant-TW")
        XCTAssertEqual(LocaleTag.normalise(" EN-us "), "en-US")
        XCTAssertNil(LocaleTag.normalise(""))
        XCTAssertNil(LocaleTag.normalise("zh--CN"))
        XCTAssertNil(LocaleTag.normalise("../../etc"))
        XCTAssertNil(LocaleTag.normalise(String(repeating: "a", count: 40)))
        XCTAssertEqual(LocaleTag.chain("zh-Hant-TW"), ["zh-Hant-TW", "zh-Hant", "zh"])
        XCTAssertEqual(LocaleTag.chain("zh-SG"), ["zh-SG", "zh-Hans", "zh"])
        XCTAssertEqual(
            LocaleTag.fallbacks("zh-TW", defaultLocale: "en-GB", available: ["en", "zh-CN", "zh-Hant"]),
            ["zh-TW", "zh-Hant", "zh", "zh-CN", "en-GB", "en"])
    }

    func testBadArgumentsAreClearErrors() {
        let (_, engine) = loaded(
            "bad.lua",
            #"""
            return { on_receive = function(msg, ctx)
              local ok, err = pcall(ctx.t, 42)
              assert(not ok and err:find("ctx.t: the key must be a string, got number"), err)
              ok, err = pcall(ctx.t, "k", "vars")
              assert(not ok and err:find("ctx.t: vars must be a table, got string"), err)
              ok, err = pcall(ctx.t, "k", nil, { locale = 5 })
              assert(not ok and err:find("option locale must be a string"), err)
              ok, err = pcall(ctx.locale.set_user, nil, "en")
              assert(not ok and err:find("ctx.locale.set_user"), err)
              ok, err = pcall(ctx.locale.set_conv, "c1", {})
              assert(not ok and err:find("the tag must be a string or nil"), err)
              assert(ctx.t(string.rep("k", 1000)):len() < 300)
              assert(#ctx.locale.available() == 0 and ctx.locale.default() == "en")
              ctx.reply("ok")
            end }
            """#)
        XCTAssertEqual(reply(engine, "x"), "ok")
    }
}
