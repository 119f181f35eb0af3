import BotHost
import Console
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import XCTest

/// The admin API (docs/CONSOLE.md) against a real embedded server, bot and plugins.
final class AdminAPITests: XCTestCase {
    /// Every token-protected endpoint, with a request that would change or reveal something.
    static let protected: [(method: String, path: String)] = [
        ("GET", "/api/plugins"), ("POST", "/api/plugins/reload"), ("POST", "/api/plugins/greeter/reload"),
        ("POST", "/api/plugins/greeter/disable"), ("POST", "/api/plugins/greeter/enable"),
        ("GET", "/api/plugins/greeter/state"), ("DELETE", "/api/plugins/greeter/state/greeted%2FTom"),
        ("GET", "/api/logs"), ("GET", "/api/interception"), ("GET", "/api/stats"), ("POST", "/api/sign"),
    ]

    func testWithoutTheTokenEveryAdminEndpointIs401AndNothingChanges() async throws {
        let harness = try await ConsoleHarness.start()
        let (tom, lobby, _) = try await harness.lobbyMember("Tom")
        _ = try await lobby.send(.text("ping"))
        try await harness.eventuallyAdmin("/api/plugins/greeter/state", contains: "greeted/Tom")
        let before = try await harness.plugin("greeter")

        for (method, path) in Self.protected {
            for token in [nil, "wrong-token-of-some-length", harness.console.token + "x"] {
                let answer = try await harness.http(method, path, token: token, body: method == "POST" ? Data("{}".utf8) : nil)
                XCTAssertEqual(answer.status, 401, "\(method) \(path) with \(token ?? "no token")")
                XCTAssertEqual(try answer.object()["code"] as? Int, 401)
                XCTAssertFalse((try answer.object()["reason"] as? String ?? "").isEmpty)
            }
        }
        let after = try await harness.plugin("greeter")
        XCTAssertEqual(after["state"] as? String, "loaded")
        XCTAssertEqual(after["generation"] as? Int, before["generation"] as? Int)
        let state = try await harness.admin("GET", "/api/plugins/greeter/state").object()
        XCTAssertEqual((state["entries"] as? [[String: Any]])?.first?["key"] as? String, "greeted/Tom")

        // Without a token the page, its files, info, types, health and metrics stay readable.
        for path in ["/", "/api/info", "/api/types", "/health", "/ready", "/metrics"] {
            let status = try await harness.http("GET", path).status
            XCTAssertEqual(status, 200, path)
        }
        await tom.close()
        await harness.stop()
    }

    func testPluginsReloadDisableAndEnable() async throws {
        let harness = try await ConsoleHarness.start()
        let (tom, lobby, events) = try await harness.lobbyMember("Tom")

        let greeter = try await harness.plugin("greeter")
        XCTAssertEqual(greeter["state"] as? String, "loaded")
        XCTAssertEqual(greeter["path"] as? String, harness.directory.appendingPathComponent("plugins/greeter.lua").path)
        let hooks = try XCTUnwrap(greeter["hooks"] as? [[String: Any]])
        XCTAssertEqual(hooks.map { $0["name"] as? String }, ["on_receive"])
        let generation = try XCTUnwrap(greeter["generation"] as? Int)

        _ = try await lobby.send(.text("ping"))
        _ = try await events.next("pong") { $0.receivedMessage?.content.text == "pong, Tom!" ? true : nil }
        let counted = try await harness.plugin("greeter")
        let onReceive = try XCTUnwrap((counted["hooks"] as? [[String: Any]])?.first)
        XCTAssertEqual(onReceive["calls"] as? Int, 1)
        XCTAssertEqual(onReceive["failures"] as? Int, 0)
        XCTAssertGreaterThan(onReceive["totalMillis"] as? Double ?? 0, 0)

        let reloaded = try await harness.admin("POST", "/api/plugins/greeter/reload")
        XCTAssertEqual(reloaded.status, 200)
        XCTAssertEqual(try reloaded.object()["reloaded"] as? [String], ["greeter"])
        let afterReload = try await harness.plugin("greeter")
        XCTAssertEqual(afterReload["generation"] as? Int, generation + 1)

        let disabled = try await harness.admin("POST", "/api/plugins/greeter/disable").object()
        XCTAssertEqual(disabled["state"] as? String, "disabled")
        XCTAssertEqual(disabled["disabledBy"] as? String, "admin")
        // Reloading everything keeps an admin's disable.
        let all = try await harness.admin("POST", "/api/plugins/reload").object()
        XCTAssertEqual(Set(all["reloaded"] as? [String] ?? []), ["greeter", "moderation"])
        let stillDisabled = try await harness.plugin("greeter")
        XCTAssertEqual(stillDisabled["state"] as? String, "disabled")
        _ = try await lobby.send(.text("ping"))
        _ = try await lobby.send(.text("marker"))
        // The bot's own messages arrive in order: nothing answered the ping before the marker was processed.
        try await Task.sleep(for: .milliseconds(300))
        let calls = try await harness.plugin("greeter")["hooks"] as? [[String: Any]]
        XCTAssertEqual(calls?.first?["calls"] as? Int ?? 0, 1, "a disabled plugin's hooks are not called")

        let enabled = try await harness.admin("POST", "/api/plugins/greeter/enable").object()
        XCTAssertEqual(enabled["state"] as? String, "loaded")
        XCTAssertNil(enabled["disabledBy"] as? String)
        _ = try await lobby.send(.text("ping"))
        _ = try await events.next("pong") { $0.receivedMessage?.content.text == "pong, Tom!" ? true : nil }

        for path in ["/api/plugins/nobody/reload", "/api/plugins/nobody/disable", "/api/plugins/nobody/state"] {
            let answer = try await harness.admin(path.hasSuffix("state") ? "GET" : "POST", path)
            XCTAssertEqual(answer.status, 404, path)
            XCTAssertEqual(try answer.object()["reason"] as? String, "no plugin named nobody")
        }
        await tom.close()
        await harness.stop()
    }

    func testStateIsListedAndKeysDeleted() async throws {
        let plugins = ConsoleHarness.plugins.merging([
            "keeper.lua": """
            return {
              name = "keeper",
              on_load = function(ctx)
                ctx.state.set("plain", {a = 1, list = {"x", "y"}})
                ctx.state.set("odd/key ü%", "v")
                ctx.state.set("brief", true, 3600)
              end,
            }
            """
        ]) { _, new in new }
        let harness = try await ConsoleHarness.start(plugins: plugins)
        let state = try await harness.admin("GET", "/api/plugins/keeper/state").object()
        XCTAssertEqual(state["plugin"] as? String, "keeper")
        let entries = try XCTUnwrap(state["entries"] as? [[String: Any]])
        XCTAssertEqual(entries.map { $0["key"] as? String }, ["brief", "odd/key ü%", "plain"])
        XCTAssertEqual((entries[2]["value"] as? [String: Any])?["list"] as? [String], ["x", "y"])
        XCTAssertNotNil(entries[0]["expiresAt"] as? Double)
        XCTAssertNil(entries[2]["expiresAt"] as? Double)

        let encoded = "odd/key ü%".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let deleted = try await harness.admin("DELETE", "/api/plugins/keeper/state/\(encoded)")
        XCTAssertEqual(deleted.status, 200)
        XCTAssertEqual(try deleted.object()["deleted"] as? Bool, true)
        let again = try await harness.admin("DELETE", "/api/plugins/keeper/state/\(encoded)")
        XCTAssertEqual(again.status, 404)
        let left = try await harness.admin("GET", "/api/plugins/keeper/state").object()
        XCTAssertEqual((left["entries"] as? [[String: Any]])?.map { $0["key"] as? String }, ["brief", "plain"])
        await harness.stop()
    }

    func testLogsArePagedAndFiltered() async throws {
        let harness = try await ConsoleHarness.start()
        let (tom, lobby, _) = try await harness.lobbyMember("Tom")
        _ = try await lobby.send(.text("ping"))
        try await harness.eventuallyAdmin("/api/logs?plugin=greeter", contains: "greeting Tom")
        let page = try await harness.admin("GET", "/api/logs?plugin=greeter").object()
        let entries = try XCTUnwrap(page["entries"] as? [[String: Any]])
        let entry = try XCTUnwrap(entries.first { $0["message"] as? String == "greeting Tom" })
        XCTAssertEqual(entry["plugin"] as? String, "greeter")
        XCTAssertEqual(entry["level"] as? String, "info")
        XCTAssertTrue(entries.allSatisfy { $0["plugin"] as? String == "greeter" })

        let next = try XCTUnwrap(page["next"] as? Int)
        let newer = try await harness.admin("GET", "/api/logs?plugin=greeter&after=\(next)").object()
        XCTAssertEqual((newer["entries"] as? [[String: Any]])?.count, 0)
        let errorsOnly = try await harness.admin("GET", "/api/logs?level=error").object()
        XCTAssertFalse((errorsOnly["entries"] as? [[String: Any]] ?? []).contains { $0["message"] as? String == "greeting Tom" })
        let everything = try await harness.admin("GET", "/api/logs?limit=1000").object()
        XCTAssertTrue((everything["entries"] as? [[String: Any]] ?? []).contains { $0["message"] as? String == "plugin loaded" })

        for query in ["after=-1", "after=x", "limit=0", "limit=1001", "level=loud"] {
            let answer = try await harness.admin("GET", "/api/logs?\(query)")
            XCTAssertEqual(answer.status, 400, query)
            XCTAssertEqual(try answer.object()["code"] as? Int, 400)
        }
        await tom.close()
        await harness.stop()
    }

    func testInterceptionAndStats() async throws {
        let harness = try await ConsoleHarness.start { $0.server.interceptionDeadlineMillis = 500 }
        let (tom, lobby, _) = try await harness.lobbyMember("Tom")
        let before = try await harness.admin("GET", "/api/interception").object()
        _ = try await lobby.send(.text("hello"))
        let refusal = try await lobby.sendRefused("a scam link")
        XCTAssertEqual(refusal.appCode, 17)
        let after = try await harness.admin("GET", "/api/interception").object()
        XCTAssertEqual(after["interceptor"] as? String, "modbot")
        XCTAssertEqual(after["attached"] as? Bool, true)
        XCTAssertEqual(after["deadlineMillis"] as? Int, 500)
        XCTAssertEqual(after["policy"] as? String, "fail-open")
        XCTAssertEqual((after["requests"] as? Int ?? 0) - (before["requests"] as? Int ?? 0), 2)
        let verdicts = try XCTUnwrap(after["verdicts"] as? [String: Int])
        let earlier = try XCTUnwrap(before["verdicts"] as? [String: Int])
        XCTAssertEqual(verdicts["block"], (earlier["block"] ?? 0) + 1)
        XCTAssertEqual(verdicts["allow"], (earlier["allow"] ?? 0) + 1)
        XCTAssertEqual(after["timeouts"] as? Int, 0)

        let stats = try await harness.admin("GET", "/api/stats").object()
        XCTAssertEqual(stats["blocked"] as? Int, 1)
        await tom.close()
        await harness.stop()
    }

    func testSignIsRefusedWithoutSignaturesAndBadBodiesAre400() async throws {
        let harness = try await ConsoleHarness.start()
        let off = try await harness.admin("POST", "/api/sign", body: Data(#"{"clientId":"Tom","action":"open"}"#.utf8))
        XCTAssertEqual(off.status, 409)
        let unsigned = try await harness.http("GET", "/api/info").object()
        XCTAssertEqual(unsigned["signatures"] as? Bool, false)
        await harness.stop()

        let signed = try await ConsoleHarness.start { configuration in
            configuration.appID = "console-app"
            configuration.masterKey = "console-master-key"
        }
        let info = try await signed.http("GET", "/api/info").object()
        XCTAssertEqual(info["signatures"] as? Bool, true)
        XCTAssertEqual(info["appId"] as? String, "console-app")
        for body in [
            #"not json"#, #"{"clientId":"Tom"}"#, #"{"clientId":"Tom","action":"fly"}"#,
            #"{"clientId":"Tom","action":"join"}"#, #"{"clientId":"","action":"open"}"#,
            // A start with no members would sign a login's text.
            #"{"clientId":"Tom","action":"start"}"#, #"{"clientId":"Tom","action":"start","members":[]}"#,
        ] {
            let answer = try await signed.admin("POST", "/api/sign", body: Data(body.utf8))
            XCTAssertEqual(answer.status, 400, body)
        }
        // A signature from the API opens a session on the raw protocol.
        let answer = try await signed.admin("POST", "/api/sign", body: Data(#"{"clientId":"Tom","action":"open"}"#.utf8)).object()
        // The raw sockets close (at the end of this scope) before the server stops.
        do {
            let socket = try RawWebSocket(port: signed.port)
            let open =
                #"{"cmd":"session","op":"open","i":1,"peerId":"Tom","appId":"console-app","t":\#(answer["timestamp"] as! Int),"n":"\#(answer["nonce"] as! String)","s":"\#(answer["signature"] as! String)"}"#
            try socket.sendText(open)
            let opened = try socket.readUntil(timeout: 5, occurrences: 1, of: #""op":"opened""#)
            XCTAssertTrue(opened, "the API's signature was not accepted")
            // The nonce is spent: the same signature again is refused.
            let replay = try RawWebSocket(port: signed.port)
            try replay.sendText(open)
            let refused = try replay.readUntil(timeout: 5, occurrences: 1, of: "4102")
            XCTAssertTrue(refused)
        }
        await signed.stop()
    }

    func testHealthAndReadiness() async throws {
        let harness = try await ConsoleHarness.start()
        let ready = try await harness.http("GET", "/ready")
        XCTAssertEqual(ready.status, 200)
        XCTAssertEqual(try ready.object()["ready"] as? Bool, true)
        await harness.hub.bot.stop()
        let notReady = try await harness.http("GET", "/ready")
        XCTAssertEqual(notReady.status, 503)
        XCTAssertTrue((try notReady.object()["reason"] as? String ?? "").contains("not logged in"), notReady.text)
        let health = try await harness.http("GET", "/health")
        XCTAssertEqual(health.status, 200)
        await harness.stop()
    }

    func testStaticFilesAreServedAndNothingElse() async throws {
        let harness = try await ConsoleHarness.start()
        let page = try await harness.http("GET", "/")
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.contentType, "text/html; charset=utf-8")
        XCTAssertTrue(page.text.lowercased().contains("<!doctype html>"))
        for path in ["/console/..%2FPackage.swift", "/console/.hidden", "/console/missing.js", "/console/index.swift"] {
            let status = try await harness.http("GET", path).status
            XCTAssertEqual(status, 404, path)
        }
        await harness.stop()
    }
}
