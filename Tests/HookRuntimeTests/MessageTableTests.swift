import Foundation
import IMCore
import XCTest

@testable import HookRuntime

/// The `msg` table every hook gets, pinned field by field (name, Lua type, value, absence) on each path that
/// builds one: `on_receive` (a coroutine), `moderation` and `before_send` (protected calls), `on_transient`, a
/// command's `run`, and the answer `ctx.ask` returns. How the host builds the table may change (it is the hot
/// part of a hook call); what a plugin sees may not (docs/PLUGINS.md "Messages").
final class MessageTableTests: XCTestCase {
    /// Lua that renders a value with its types: `i:` integer, `f:` float, `s:` string, `b:` boolean, tables
    /// as `{key=value,…}` with sorted keys; a table with a metatable is marked `meta`.
    static let render = """
        local function render(v)
          local t = type(v)
          if t == "table" then
            local keys = {}
            for k in pairs(v) do keys[#keys + 1] = k end
            table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
            local parts = {}
            for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. "=" .. render(v[k]) end
            return (getmetatable(v) and "meta" or "") .. "{" .. table.concat(parts, ",") .. "}"
          elseif t == "number" then
            return (math.type(v) == "integer" and "i:" or "f:") .. tostring(v)
          elseif t == "string" then
            return "s:" .. v
          end
          return t:sub(1, 1) .. ":" .. tostring(v)
        end
        """

    /// A plugin whose `hook` replies with the rendered message.
    static func showing(_ hook: String, returning result: String = "nil") -> String {
        """
        \(render)
        return { \(hook) = function(msg, ctx)
          ctx.reply(render(msg))
          return \(result)
        end }
        """
    }

    /// A member writing in Chinese with an emoji and a mention; attrs with nested values of every kind.
    static let chat = HookMessage(
        id: "msg-1", cid: "群聊", from: "小明", type: MessageType.text.rawValue, text: "@Tom 你好 👋 今晚一起吃饭吗？",
        attrs: [
            "mentions": .array([.string("Tom"), .string("小红")]), "mentionAll": .bool(false), "score": .double(1.5),
            "count": .int(3), "meta": .object(["lang": .string("zh-CN"), "tags": .array([.int(1), .int(2)])]),
        ],
        timestamp: 1_700_000_000_123)

    static let chatRendered =
        "{attrs={count=i:3,mentionAll=b:false,mentions={1=s:Tom,2=s:小红},meta={lang=s:zh-CN,tags={1=i:1,2=i:2}},score=f:1.5},"
        + "cid=s:群聊,from=s:小明,id=s:msg-1,text=s:@Tom 你好 👋 今晚一起吃饭吗？,timestamp=i:1700000000123,"
        + "transient=b:false,type=i:-1,type_name=s:text}"

    func testATextMessageInChineseWithAMentionOnEveryPathThatCallsAHook() {
        let (_, engine) = loaded([
            "a_receive.lua": Self.showing("on_receive"), "b_moderation.lua": Self.showing("moderation"),
            "c_before.lua": Self.showing("before_send"), "d_transient.lua": Self.showing("on_transient"),
        ])
        XCTAssertEqual(sentTexts(engine.receive(Self.chat).actions), [Self.chatRendered])
        XCTAssertEqual(sentTexts(engine.moderate(Self.chat).actions), [Self.chatRendered])
        XCTAssertEqual(sentTexts(engine.beforeSend(Self.chat).actions), [Self.chatRendered])
        // A transient message (an "operation" such as typing) says so.
        XCTAssertEqual(
            sentTexts(engine.transient(Self.chat).actions),
            [Self.chatRendered.replacingOccurrences(of: "transient=b:false", with: "transient=b:true")])
    }

    func testAbsentFieldsAreNilAndAttrsIsAlwaysATable() {
        let (_, engine) = loaded("show.lua", Self.showing("on_receive"))
        // A draft-like message: empty id and sender, no text, no attrs, timestamp 0.
        let bare = HookMessage(cid: "c1", type: MessageType.text.rawValue)
        XCTAssertEqual(
            sentTexts(engine.receive(bare).actions),
            ["{attrs={},cid=s:c1,from=s:,id=s:,timestamp=i:0,transient=b:false,type=i:-1,type_name=s:text}"])
    }

    func testLocationBinaryRecalledAndCardMessages() {
        let (_, engine) = loaded("show.lua", Self.showing("moderation"))
        var place = HookMessage(
            id: "loc", cid: "c1", from: "u1", type: MessageType.location.rawValue, text: "在这里见 📍",
            location: Location(latitude: 31.2304, longitude: 121.4737), timestamp: 5)
        XCTAssertEqual(
            sentTexts(engine.moderate(place).actions),
            [
                "{attrs={},cid=s:c1,from=s:u1,id=s:loc,location={latitude=f:31.2304,longitude=f:121.4737},text=s:在这里见 📍,"
                    + "timestamp=i:5,transient=b:false,type=i:-5,type_name=s:location}"
            ])
        place.location = Location(latitude: 0, longitude: -180)
        XCTAssertTrue(sentTexts(engine.moderate(place).actions)[0].contains("location={latitude=f:0.0,longitude=f:-180.0}"))
        let binary = HookMessage(id: "b", cid: "c1", from: "u1", type: 0, timestamp: 6, binary: "AAEC/w==")
        XCTAssertEqual(
            sentTexts(engine.moderate(binary).actions),
            ["{attrs={},binary=s:AAEC/w==,cid=s:c1,from=s:u1,id=s:b,timestamp=i:6,transient=b:false,type=i:0}"])
        let recalled = HookMessage(id: "r", cid: "c1", from: "u1", type: MessageType.recalled.rawValue, timestamp: 7)
        XCTAssertEqual(
            sentTexts(engine.moderate(recalled).actions),
            ["{attrs={},cid=s:c1,from=s:u1,id=s:r,timestamp=i:7,transient=b:false,type=i:-127,type_name=s:recalled}"])
        let card = HookMessage(id: "k", cid: "c1", from: "bot", type: HookMessageTypes.card, text: "投票", timestamp: 8)
        XCTAssertEqual(
            sentTexts(engine.moderate(card).actions),
            ["{attrs={},cid=s:c1,from=s:bot,id=s:k,text=s:投票,timestamp=i:8,transient=b:false,type=i:100,type_name=s:card}"])
    }

    func testCustomTypesHaveTheirRegisteredNameAndUnknownOnesNone() {
        let (_, engine) = loaded(
            "show.lua",
            """
            \(Self.render)
            return {
              on_load = function(ctx) ctx.types.register({ type = 7, name = "menu", fields = { title = "string" } }) end,
              on_receive = function(msg, ctx) ctx.reply(render(msg)) end,
            }
            """)
        let menu = HookMessage(
            id: "m", cid: "c1", from: "u1", type: 7, text: "午饭菜单 🍜", attrs: ["title": .string("午饭菜单 🍜")], timestamp: 9)
        XCTAssertEqual(
            sentTexts(engine.receive(menu).actions),
            [
                "{attrs={title=s:午饭菜单 🍜},cid=s:c1,from=s:u1,id=s:m,text=s:午饭菜单 🍜,timestamp=i:9,transient=b:false,"
                    + "type=i:7,type_name=s:menu}"
            ])
        var unknown = menu
        unknown.type = 8
        XCTAssertEqual(
            sentTexts(engine.receive(unknown).actions),
            [
                "{attrs={title=s:午饭菜单 🍜},cid=s:c1,from=s:u1,id=s:m,text=s:午饭菜单 🍜,timestamp=i:9,transient=b:false,type=i:8}"
            ])
    }

    func testFilesStoredAndNotStored() throws {
        let f = Fixture()
        f.write("show.lua", Self.showing("moderation"))
        let engine = f.runtime()
        let sha = String(repeating: "ab", count: 32)
        engine.setMedia(
            MediaAccessTests.DirectoryMedia(
                directory: f.root,
                records: [
                    "pic": HookMediaRecord(
                        id: "pic", url: "/media/pic/猫.png", name: "猫.png",
                        metadata: MediaMetadata(size: 2048, sha256: sha, mime: "image/png", format: "png", width: 64, height: 48))
                ]))
        XCTAssertEqual(engine.loadAll().errors, [])
        var photo = HookMessage(
            id: "p", cid: "c1", from: "小明", type: MessageType.image.rawValue, text: "我的猫 🐱", timestamp: 10)
        photo.file = FileInfo(url: "/media/pic/猫.png", objId: "pic", name: "猫.png", format: "png", size: 2048, width: 64, height: 48)
        XCTAssertEqual(
            sentTexts(engine.moderate(photo).actions),
            [
                "{attrs={},cid=s:c1,file={format=s:png,height=i:48,id=s:pic,mime=s:image/png,name=s:猫.png,sha256=s:\(sha),"
                    + "size=i:2048,stored=b:true,url=s:/media/pic/猫.png,width=i:64},from=s:小明,id=s:p,text=s:我的猫 🐱,"
                    + "timestamp=i:10,transient=b:false,type=i:-2,type_name=s:image}"
            ])
        // A file only at a URL: the sender's values, not stored; a voice note's duration is a float.
        var voice = HookMessage(id: "v", cid: "c1", from: "u1", type: MessageType.audio.rawValue, timestamp: 11)
        voice.file = FileInfo(url: "https://cdn.example.org/v.mp3", size: 3000, duration: 2.5)
        XCTAssertEqual(
            sentTexts(engine.moderate(voice).actions),
            [
                "{attrs={},cid=s:c1,file={duration=f:2.5,size=i:3000,stored=b:false,url=s:https://cdn.example.org/v.mp3},"
                    + "from=s:u1,id=s:v,timestamp=i:11,transient=b:false,type=i:-3,type_name=s:audio}"
            ])
    }

    func testEachCallGetsAFreshTableThatAPluginMayKeep() {
        // `keep` stores every msg it gets and, on "show", lists what the kept tables hold now; it also changes
        // msg and msg.attrs, which neither the next plugin nor a later call may see.
        let (_, engine) = loaded([
            "a_keep.lua": """
            local kept = {}
            return { priority = 10, on_receive = function(msg, ctx)
              if msg.text == "show" then
                local out = {}
                for i, m in ipairs(kept) do out[i] = m.id .. ":" .. m.text .. ":" .. tostring(m.attrs.seen) end
                ctx.reply(table.concat(out, "|") .. "|same=" .. tostring(rawequal(kept[1], kept[2])))
                return
              end
              kept[#kept + 1] = msg
              msg.attrs.seen = (msg.attrs.seen or 0) + 1
              msg.text = msg.text .. "!"
            end }
            """,
            "b_next.lua": """
            return { priority = 5, on_receive = function(msg, ctx)
              if msg.text ~= "show" then ctx.reply(msg.text .. ":" .. tostring(msg.attrs.seen)) end
            end }
            """,
        ])
        XCTAssertEqual(sentTexts(engine.receive(msg("早上好 ☀️", id: "1")).actions), ["早上好 ☀️:nil"])
        XCTAssertEqual(sentTexts(engine.receive(msg("晚安 🌙", id: "2")).actions), ["晚安 🌙:nil"])
        XCTAssertEqual(sentTexts(engine.receive(msg("show", id: "3")).actions), ["1:早上好 ☀️!:1|2:晚安 🌙!:1|same=false"])
    }

    func testBeforeSendPassesTheChangedMessageOnAsANewTable() {
        let (_, engine) = loaded([
            "a_change.lua": """
            return { priority = 10, before_send = function(msg, ctx)
              msg.text = msg.text .. " ✅"
              msg.attrs.signed = true
              return msg
            end }
            """,
            "b_show.lua": Self.showing("before_send").replacingOccurrences(of: "return {", with: "return { priority = 5,"),
        ])
        let out = engine.beforeSend(Self.chat)
        XCTAssertEqual(out.message?.text, "@Tom 你好 👋 今晚一起吃饭吗？ ✅")
        XCTAssertEqual(
            sentTexts(out.actions),
            [
                Self.chatRendered.replacingOccurrences(of: "score=f:1.5}", with: "score=f:1.5,signed=b:true}")
                    .replacingOccurrences(of: "吃饭吗？,", with: "吃饭吗？ ✅,")
            ])
    }

    func testACommandsRunAndADialogsAnswerGetTheSameTable() {
        let (_, engine) = loaded(
            "ask.lua",
            """
            \(Self.render)
            return { on_load = function(ctx)
              ctx.commands.add{ name = "show", args = "[what]", run = function(args, msg, ctx) ctx.reply(render(msg)) end }
              ctx.commands.add{ name = "ask", run = function(args, msg, ctx)
                local answer = ctx.ask("说吧")
                ctx.reply(render(answer))
              end }
            end }
            """)
        var show = Self.chat
        show.text = "!show 一下"
        XCTAssertEqual(
            sentTexts(engine.receive(show).actions),
            [Self.chatRendered.replacingOccurrences(of: "text=s:@Tom 你好 👋 今晚一起吃饭吗？", with: "text=s:!show 一下")])
        var ask = Self.chat
        ask.text = "!ask"
        XCTAssertEqual(sentTexts(engine.receive(ask).actions), ["说吧"])
        XCTAssertEqual(sentTexts(engine.receive(Self.chat).actions), [Self.chatRendered])
    }
}
