import BotHost
import HookRuntime
import IMCore
import XCTest

final class ConfigFileTests: XCTestCase {
    func testParsesTheConfigSubset() throws {
        let text = #"""
            # hookbot.toml
            client_id = "modbot"   # trailing comment
            port = 8_080
            ratio = 0.5
            enabled = true
            words = [
              "darn",   # words to block
              'heck',
            ]

            [plugins.moderation]
            mute_minutes = 10
            limits = { links = 2, mentions = 5 }

            [plugins."auto reply"]
            faq = """
            Q: hours?
            A: always"""

            [[plugins.autoreply.rules]]
            match = "^hi"
            reply = "hello {from}\u0021"

            [[plugins.autoreply.rules]]
            match = "bye"
            """#
        let config = try ConfigFile(text: text).root
        XCTAssertEqual(config["client_id"], "modbot")
        XCTAssertEqual(config["port"], 8080)
        XCTAssertEqual(config["ratio"], 0.5)
        XCTAssertEqual(config["enabled"], true)
        XCTAssertEqual(config["words"], ["darn", "heck"])
        let plugins = try XCTUnwrap(config["plugins"])
        XCTAssertEqual(plugins["moderation"]?["mute_minutes"], 10)
        XCTAssertEqual(plugins["moderation"]?["limits"], ["links": 2, "mentions": 5])
        XCTAssertEqual(plugins["auto reply"]?["faq"], "Q: hours?\nA: always")
        XCTAssertEqual(plugins["autoreply"]?["rules"], [["match": "^hi", "reply": "hello {from}!"], ["match": "bye"]])
    }

    func testSyntaxErrorsNameFileAndLine() {
        func failure(_ text: String) -> ConfigurationError? {
            do {
                _ = try ConfigFile(text: text, name: "bot.toml")
                return nil
            } catch { return error }
        }
        XCTAssertEqual(failure("a = 1\nb = \"open")?.line, 2)
        XCTAssertEqual(failure("a = 1\na = 2")?.line, 2)
        XCTAssertEqual(failure("[x]\ny = nope")?.line, 2)
        XCTAssertEqual(failure("a = 1\n\nb = [1, 2")?.line, 3)
        XCTAssertEqual(failure("a = 1 2")?.file, "bot.toml")
        XCTAssertNotNil(failure("a = 1\n[a]"))
        XCTAssertTrue(failure("when = 1979-05-27")?.description.hasPrefix("bot.toml:1: when: dates") == true)
    }

    /// TOMLKit's parser also aborts on a `}` where an array expects a value (found by `make fuzz`): a syntax
    /// error with its line instead; valid arrays and braces inside strings and comments are untouched.
    func testABraceWhereAnArrayExpectsAValueIsAnErrorNotACrash() throws {
        for (text, line) in [
            ("[plugins.autoreply]\nrules = [ } ]\n", 2), ("x = [1, }]", 1), ("x = [\n  # nothing\n  }\n]", 3), ("x = [[ }]]", 1),
        ] {
            XCTAssertThrowsError(try ConfigFile(text: text), text) { error in
                let error = error as? ConfigurationError
                XCTAssertEqual(error?.line, line, "\(text): \(String(describing: error))")
                XCTAssertTrue(error?.message.contains("saw '}'") == true, "\(String(describing: error))")
            }
        }
        let valid = try ConfigFile(text: "x = [ {a = 1}, {b = [2, 3]}, ]\ny = \"[ } ]\" # [ }\nz = [\n  1, # }\n]")
        XCTAssertEqual(valid.root["y"], .string("[ } ]"))
        XCTAssertEqual(valid.root["z"], .array([.int(1)]))
    }

    /// TOMLKit's parser aborts the process on a table header whose first key starts with a character that
    /// cannot start a key (found by `make fuzz`): such headers are syntax errors with their line instead.
    func testTableHeadersThatCannotStartWithAKeyAreErrorsNotCrashes() throws {
        for (text, line) in [
            ("[bot]\nx = 1\n\n[/bot]\n", 4), ("[[ +rules]]\n", 1), ("\n[\u{e9}t\u{e9}]\n", 2), ("[\u{1}]", 1),
            // after a byte order mark, the first line's header is still a header
            ("\u{FEFF}[\u{eb}ot]\nclient_id = \"bot\"\n", 1),
        ] {
            XCTAssertThrowsError(try ConfigFile(text: text), text) { error in
                let error = error as? ConfigurationError
                XCTAssertEqual(error?.line, line, "\(text): \(String(describing: error))")
                XCTAssertTrue(error?.message.contains("expected a key") == true, "\(String(describing: error))")
            }
        }
        XCTAssertEqual(try ConfigFile(text: "\u{FEFF}[bot]\nclient_id = \"机器人\"\n").root["bot"]?["client_id"], "机器人")
        // Brackets inside values, strings and comments are not headers.
        let valid = """
            x = [
              [1, 2],
              [+3],
            ]
            s = \"\"\"
            [/not a header]
            \"\"\"
            # [/comment]
            ["quoted key"]
            t = '[/x]'
            """
        let file = try ConfigFile(text: valid)
        XCTAssertEqual(file.root["x"], .array([.array([1, 2]), .array([3])]))
        XCTAssertEqual(file.root["s"], .string("[/not a header]\n"))
        XCTAssertEqual(file.root["quoted key"]?["t"], .string("[/x]"))
    }

    func testKeysAreLocated() throws {
        let file = try ConfigFile(
            text: #"""
                # comment
                [bot]
                client_id = "x"   # a = 1
                rules = [
                  { exact = "ping" },
                ]
                text = """
                fake = 1
                """

                [plugins."auto reply"]
                cooldown = 3
                nested.key = 1
                [[plugins.list]]
                item = 1
                """#)
        XCTAssertEqual(file.line(of: "bot"), 2)
        XCTAssertEqual(file.line(of: "bot.client_id"), 3)
        XCTAssertEqual(file.line(of: "bot.rules"), 4)
        XCTAssertNil(file.line(of: "bot.exact"), "keys inside values are not keys")
        XCTAssertNil(file.line(of: "fake"), "nor are lines of multi-line strings")
        XCTAssertEqual(file.line(of: "plugins.auto reply"), 11)
        XCTAssertEqual(file.line(of: "plugins.auto reply.cooldown"), 12)
        XCTAssertEqual(file.line(of: "plugins.auto reply.nested.key"), 13)
        XCTAssertEqual(file.line(of: "plugins.list.item"), 15)
    }

    /// `[bot] app_key` (LeanCloud's storage SDK signs with it) is read, `env:` allowed, for the embedded server.
    func testAppKeyIsRead() throws {
        XCTAssertEqual(try BotConfiguration.parse("[bot]\napp_key = \"the-app-key\"", fileName: "hookbot.toml").appKey, "the-app-key")
        XCTAssertNil(try BotConfiguration.parse("[bot]\nclient_id = \"a\"", fileName: "hookbot.toml").appKey)
    }

    /// Why `text` cannot be read (the error as `hookbot check` prints it), or nil when it can.
    private static func failure(_ text: String, fileName: String) -> String? {
        do {
            _ = try BotConfiguration.parse(text, fileName: fileName)
            return nil
        } catch { return "\(error)" }
    }

    /// Each section is read by its own type (ServerSettings, PluginsSettings, ConsoleSettings,
    /// PluginWebhookSettings, HTTPPolicy, BotConfiguration for `[bot]`) with one shared reader: a wrong type or an
    /// unknown key reads the same in every section, with the section's path, the file and the line.
    func testEverySectionReportsItsKeysTheSameWay() {
        func failure(_ text: String) -> String? { Self.failure(text, fileName: "hookbot.toml") }
        XCTAssertEqual(failure("[bot]\naccept_invitations = \"yes\""), "hookbot.toml:2: bot.accept_invitations: must be true or false")
        XCTAssertEqual(failure("[console]\nenabled = \"yes\""), "hookbot.toml:2: console.enabled: must be true or false")
        XCTAssertEqual(failure("[server]\nsigned_urls = 1"), "hookbot.toml:2: server.signed_urls: must be true or false")
        XCTAssertEqual(
            failure("[plugins]\nwatch_interval_seconds = \"1s\""), "hookbot.toml:2: plugins.watch_interval_seconds: must be a number")
        XCTAssertEqual(failure("[http.fetch]\nmax_kb = 1.5"), "hookbot.toml:2: http.fetch.max_kb: must be an integer")
        XCTAssertEqual(failure("[webhooks]\nci = 5"), "hookbot.toml:2: webhooks.ci: must be a secret (a string)")
        XCTAssertEqual(failure("[roles]\nmoderator = \"alice\""), "hookbot.toml:2: roles.moderator: must be a list of client ids")
        XCTAssertEqual(failure("[translate]\nlobby = 7"), "hookbot.toml:2: translate.lobby: must be a language code")
        XCTAssertEqual(
            failure("[console]\n# 控制台 🛠\ntokn = \"0123456789abcdef\""),
            "hookbot.toml:3: console.tokn: unknown key (known: enabled, host, overrides, port, token)")
        XCTAssertEqual(
            failure("[server]\nmedia_grace = \"一天\""),
            #"hookbot.toml:2: server.media_grace: must be seconds (0 or more) or a string such as "30m", "24h" or "7d""#)
        let read = try? BotConfiguration.parse(
            "[server]\nlobby = \"茶水间 ☕\"\nport = 0\n[plugins]\nwatch_interval_seconds = 0\n[plugins.welcome]\ngreeting = \"欢迎 👋\"")
        XCTAssertEqual(read?.server.lobbyName, "茶水间 ☕")
        XCTAssertEqual(read?.server.port, 0)
        XCTAssertEqual(read?.plugins.watchInterval, 0)
        let roles = try? BotConfiguration.parse("[roles]\nmoderator = [\"alice\", \"小明\"]\n[translate]\nlobby = \"zh-CN\"")
        XCTAssertEqual(roles?.commands.roles["moderator"], ["alice", "小明"])
        XCTAssertEqual(roles?.translateTo, ["lobby": "zh-CN"])
        XCTAssertEqual(read?.plugins.config["welcome"]?["greeting"]?.stringValue, "欢迎 👋")
    }

    func testUnknownKeysAndWrongTypesNameFileLineAndKey() {
        func failure(_ text: String) -> String? { Self.failure(text, fileName: "conf/hookbot.toml") }
        XCTAssertEqual(
            failure("[bot]\nclient_id = \"a\"\nreply_limt = 3"),
            "conf/hookbot.toml:3: bot.reply_limt: unknown key (known: accept_invitations, admin_socket, app_id, app_key, client_id, command_prefix, global_reply_limit, interceptor_secret, locale, master_key, max_hops, reply_limit, reply_window_seconds, sends_per_event, state, tag)"
        )
        XCTAssertEqual(
            failure("\n[sever]\nport = 1"),
            "conf/hookbot.toml:2: sever: unknown section (known: bot, console, http, plugins, push, roles, server, translate, webhooks)")
        XCTAssertEqual(failure("[server]\nport = \"8080\""), "conf/hookbot.toml:2: server.port: must be an integer")
        XCTAssertEqual(failure("[plugins]\nmoderation = 3"), "conf/hookbot.toml:2: plugins.moderation: must be a table")
        XCTAssertEqual(failure("[console]\ntoken = \"short\""), "conf/hookbot.toml:2: console.token: must be at least 16 characters")
        XCTAssertEqual(
            failure("[http.fetch]\nhosts = \"api.example.org\""),
            #"conf/hookbot.toml:2: http.fetch.hosts: must be a list of hosts ("api.example.org" or "host:port")"#)
        XCTAssertEqual(
            failure("[http.fetch]\nhosts = []\ntimeout = 3"),
            "conf/hookbot.toml:3: http.fetch.timeout: unknown key (known: concurrency, hosts, max_kb, timeout_ms)")
        XCTAssertEqual(failure("[webhooks]\nci = \"short\""), "conf/hookbot.toml:2: webhooks.ci: must be at least 16 characters")
        let http = try? BotConfiguration.parse("[http.fetch]\nhosts = [\"API.example.org\", \"127.0.0.1:8080\"]\nmax_kb = 2")
        XCTAssertEqual(http?.httpPolicies["fetch"]?.hosts, ["api.example.org", "127.0.0.1:8080"])
        XCTAssertEqual(http?.httpPolicies["fetch"]?.maxBytes, 2048)
    }

    func testPathsAreRelativeToTheFileUnlessAbsolute() throws {
        let base = URL(fileURLWithPath: "/etc/hookbot")
        let relative = try BotConfiguration.parse("[plugins]\ndirectory = \"plugins\"\n[bot]\nstate = \"s.sqlite\"", relativeTo: base)
        XCTAssertEqual(relative.plugins.directory.path, "/etc/hookbot/plugins")
        XCTAssertEqual(relative.statePath, "/etc/hookbot/s.sqlite")
        let absolute = try BotConfiguration.parse(
            "[plugins]\ndirectory = \"/srv/plugins\"\n[server]\ndb = \"/var/h.sqlite\"", relativeTo: base)
        XCTAssertEqual(absolute.plugins.directory.path, "/srv/plugins")
        XCTAssertEqual(absolute.server.database, "/var/h.sqlite")
    }

    func testTheEmbeddedServerMayKeepItsStateInPostgreSQL() throws {
        let url = "postgres://hookbot:secret@db:5432/hookbot?schema=chat"
        let direct = try BotConfiguration.parse("[server]\ndatabase = \"\(url)\"")
        XCTAssertEqual(direct.server.databaseURL, url)
        XCTAssertNil(try BotConfiguration.parse("[server]\ndb = \"h.sqlite\"").server.databaseURL, "SQLite unless a URL is given")
        setenv("HOOKBOT_TEST_DATABASE_URL", url, 1)
        defer { unsetenv("HOOKBOT_TEST_DATABASE_URL") }
        XCTAssertEqual(try BotConfiguration.parse("[server]\ndatabase = \"env:HOOKBOT_TEST_DATABASE_URL\"").server.databaseURL, url)
        XCTAssertThrowsError(try BotConfiguration.parse("[bot]\nclient_id = \"bot\"\n[server]\ndatabase = \"mysql://db/x\"")) { error in
            XCTAssertTrue("\(error)".contains(":4: server.database: must be a postgres:// URL"), "\(error)")
        }
    }

    func testTheEmbeddedServerTakesATLSCertificateAndKeyTogether() throws {
        let base = URL(fileURLWithPath: "/etc/hookbot")
        let both = try BotConfiguration.parse(
            "[server]\ntls_cert = \"tls/chain.pem\"\ntls_key = \"/keys/hookbot.key\"", relativeTo: base)
        XCTAssertEqual(both.server.tlsCertificate, "/etc/hookbot/tls/chain.pem")
        XCTAssertEqual(both.server.tlsKey, "/keys/hookbot.key")
        XCTAssertNil(try BotConfiguration.parse("[server]\nport = 1").server.tlsCertificate)
        XCTAssertThrowsError(try BotConfiguration.parse("[server]\nport = 1\ntls_cert = \"chain.pem\"")) { error in
            XCTAssertEqual("\(error)", "hookbot.toml:3: server.tls_cert: tls_cert and tls_key go together")
        }
        XCTAssertThrowsError(try BotConfiguration.parse("[server]\ntls_key = \"key.pem\"")) { error in
            XCTAssertEqual("\(error)", "hookbot.toml:2: server.tls_key: tls_cert and tls_key go together")
        }
    }

    func testTheInterceptionDeadlineMustLeaveRoomForAReview() throws {
        let tooShort = try BotConfiguration.parse("[server]\ninterception_deadline_ms = 20")
        XCTAssertThrowsError(try tooShort.validate()) { error in
            XCTAssertTrue("\(error)".contains("server.interception_deadline_ms"), "\(error)")
        }
        let shipped = BotConfiguration()
        XCTAssertNoThrow(try shipped.validate())
        XCTAssertEqual(shipped.reviewBudget, .milliseconds(160), "200 ms less a 20% margin")
        var long = shipped
        long.server.interceptionDeadlineMillis = 50
        XCTAssertEqual(long.reviewBudget, .milliseconds(30), "at least 20 ms of margin")
    }
}
