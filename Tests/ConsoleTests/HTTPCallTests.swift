import BotHost
import Foundation
import HookRuntime
import HookbotTestSupport
import Hummingbird
import IMClient
import Logging
import ServiceLifecycle
import Synchronization
import XCTest

/// `ctx.http` against a real HTTP server on loopback, through the running bot: a request succeeds, times
/// out, is refused by the allow-list, hits the size cap or cannot connect — while other messages keep
/// flowing through the bot during a slow request.
final class HTTPCallTests: XCTestCase {
    static let fetch = """
        return { name = "fetch", config = { base = "" },
          on_receive = function(msg, ctx)
            local target = msg.text and msg.text:match("^fetch (%S+)")
            if not target then return end
            local url = target:find("^http") and target or (ctx.config.base .. target)
            local id, err = ctx.http.request({ url = url, timeout = 1 }, function(res, ctx)
              if res.ok then ctx.reply("got " .. res.status .. " " .. (res.json and res.json.hello or res.body))
              else ctx.reply("failed " .. tostring(res.status) .. ": " .. res.error) end
            end)
            if not id then ctx.reply("refused: " .. err) end
          end }
        """

    func testRequestsTimeoutsAllowListAndSizeCap() async throws {
        let (web, webPort) = try await Self.startWebServer()
        let harness = try await ConsoleHarness.start(plugins: ConsoleHarness.plugins.merging(["fetch.lua": Self.fetch]) { _, new in new }) {
            $0.plugins.config["fetch"] = ["base": .string("http://127.0.0.1:\(webPort)")]
            $0.httpPolicies["fetch"] = HTTPPolicy(
                hosts: ["127.0.0.1:\(webPort)", "127.0.0.1:1"], timeoutCap: 5,
                maxBytes: 64 << 10, concurrency: 2)
        }
        let (tom, lobby, events) = try await harness.lobbyMember("Tom")

        let ok = try await harness.botAnswer(to: "fetch /ok", in: lobby, events)
        XCTAssertEqual(ok, "got 200 world")

        // While a slow request is out, the bot answers other messages.
        _ = try await lobby.send(.text("fetch /slow"))
        let first = try await harness.botAnswer(to: "ping", in: lobby, events)
        XCTAssertEqual(first, "pong, Tom!")
        let slow = try await harness.botReply(events, "the timeout")
        XCTAssertTrue(slow.hasPrefix("failed nil: timeout"), slow)

        let refused = try await harness.botAnswer(to: "fetch https://example.org/", in: lobby, events)
        XCTAssertEqual(refused, "refused: ctx.http: example.org is not in this plugin's allowed hosts ([http.fetch] hosts)")

        let big = try await harness.botAnswer(to: "fetch /big", in: lobby, events)
        XCTAssertEqual(big, "failed 200: too large: the response is over 65536 bytes")

        let unreachable = try await harness.botAnswer(to: "fetch http://127.0.0.1:1/nothing", in: lobby, events)
        XCTAssertTrue(unreachable.hasPrefix("failed nil: failed:"), unreachable)

        let plugin = try await harness.plugin("fetch")
        XCTAssertEqual(plugin["http"] as? [String: Int], ["started": 4, "failed": 3, "refused": 1, "inFlight": 0])
        await tom.close()
        await harness.stop()
        await web.triggerGracefulShutdown()
    }

    /// The shipped translate plugin with a LibreTranslate-compatible service: auto-translation answers
    /// with the service's text, and with the phrase table when the service fails.
    func testTranslatePluginUsesTheServiceAndFallsBackToThePhraseTable() async throws {
        let (web, webPort) = try await Self.startWebServer()
        let shipped = ConsoleHarness.repository.appendingPathComponent("plugins")
        var sources: [String: String] = ConsoleHarness.plugins
        for file in ["translate.lua", "lib/phrasebook.lua", "lib/text.lua", "locales/translate/en.toml", "locales/translate/zh-CN.toml"] {
            sources[file] = try String(contentsOf: shipped.appendingPathComponent(file), encoding: .utf8)
        }
        let harness = try await ConsoleHarness.start(plugins: sources) {
            $0.plugins.config["translate"] = ["api_url": .string("http://127.0.0.1:\(webPort)/translate"), "api_key": "k-123"]
            $0.httpPolicies["translate"] = HTTPPolicy(hosts: ["127.0.0.1:\(webPort)"])
        }
        let (tom, lobby, events) = try await harness.lobbyMember("Tom")
        try await harness.assertBotAnswers(
            [
                ("/translate zh", "auto-translation to zh is on"),
                ("good morning", "Tom (zh): [zh k-123] good morning"),
                ("hello", "Tom (zh): 你好"),
            ], in: lobby, events)
        await tom.close()
        await harness.stop()
        await web.triggerGracefulShutdown()
    }

    /// An allowed host that redirects: within itself (followed), to a host that is not allowed, to a
    /// non-HTTP URL and in a loop (refused with the 3xx and a reason). The other host, a real listener
    /// that counts what reaches it, never gets a request, and its body never reaches the plugin. Followed
    /// redirects send what browsers send: 303 (and 302 after a POST) continue as a GET without the body,
    /// 307 keeps the method and body, and the plugin's Authorization header goes along on the same origin
    /// but not to another allowed host (the listeners echo what they got).
    func testRedirectsAreFollowedOnlyWithinTheAllowedHosts() async throws {
        @Sendable func echo(_ request: Request) async throws -> String {
            let body = try await request.body.collect(upTo: 1 << 16)
            return "\(request.method) auth=\(request.headers[.authorization] ?? "none") body=\(String(buffer: body))"
        }
        let otherHits = Hits()
        let (other, otherPort) = try await Self.startWebServer { router in
            router.get("/secret") { _, _ -> String in
                otherHits.add()
                return "the other service's secret"
            }
        }
        let (partner, partnerPort) = try await Self.startWebServer { router in
            router.get("/seen") { request, _ in try await echo(request) }
        }
        let loops = Hits()
        let (web, webPort) = try await Self.startWebServer { router in
            router.get("/seen") { request, _ in try await echo(request) }
            router.post("/seen") { request, _ in try await echo(request) }
            router.post("/see-other") { _, _ in Response(status: .seeOther, headers: [.location: "/seen"]) }
            router.post("/temporary") { _, _ in Response(status: .temporaryRedirect, headers: [.location: "/seen"]) }
            router.post("/to-partner") { _, _ in
                Response(status: .found, headers: [.location: "http://127.0.0.1:\(partnerPort)/seen"])
            }
            func redirect(_ path: String, to location: @escaping @Sendable () -> String, status: HTTPResponse.Status = .found) {
                router.get(RouterPath(path)) { _, _ in Response(status: status, headers: [.location: location()]) }
            }
            redirect("/to-other", to: { "http://127.0.0.1:\(otherPort)/secret" })
            redirect("/to-ok", to: { "/ok" }, status: .temporaryRedirect)
            redirect("/to-file", to: { "file:///etc/passwd" })
            redirect("/loop") {
                loops.add()
                return "/loop"
            }
        }
        let poster = """
            return { name = "poster", config = { base = "" },
              on_receive = function(msg, ctx)
                local path = msg.text and msg.text:match("^post (%S+)")
                if not path then return end
                ctx.http.request({ url = ctx.config.base .. path, method = "POST", body = "x",
                  headers = { Authorization = "Bearer k-1" } }, function(res, ctx)
                  ctx.reply(res.ok and ("posted " .. res.body) or ("failed " .. tostring(res.status) .. ": " .. res.error))
                end)
              end }
            """
        let harness = try await ConsoleHarness.start(plugins: ["fetch.lua": Self.fetch, "poster.lua": poster]) {
            $0.plugins.config["fetch"] = ["base": .string("http://127.0.0.1:\(webPort)")]
            $0.httpPolicies["fetch"] = HTTPPolicy(hosts: ["127.0.0.1:\(webPort)"], timeoutCap: 5)
            $0.plugins.config["poster"] = ["base": .string("http://127.0.0.1:\(webPort)")]
            $0.httpPolicies["poster"] = HTTPPolicy(hosts: ["127.0.0.1:\(webPort)", "127.0.0.1:\(partnerPort)"], timeoutCap: 5)
        }
        let (tom, lobby, events) = try await harness.lobbyMember("Tom")

        try await harness.assertBotAnswers(
            [
                ("fetch /to-ok", "got 200 world"),
                (
                    "fetch /to-other",
                    "failed 302: redirect refused: 127.0.0.1:\(otherPort) is not in this plugin's allowed hosts ([http.fetch] hosts)"
                ),
                ("fetch /to-file", "failed 302: redirect refused: file:///etc/passwd is not an http or https URL"),
                ("fetch /loop", "failed 302: redirect refused: more than \(HTTPRedirects.maxHops) redirects"),
            ], in: lobby, events)
        XCTAssertEqual(loops.count, HTTPRedirects.maxHops + 1, "the first request and \(HTTPRedirects.maxHops) redirects")
        XCTAssertEqual(otherHits.count, 0, "the host that is not allowed got a request")

        try await harness.assertBotAnswers(
            [
                ("post /see-other", "posted GET auth=Bearer k-1 body="),
                ("post /temporary", "posted POST auth=Bearer k-1 body=x"),
                ("post /to-partner", "posted GET auth=none body="),
            ], in: lobby, events)

        await tom.close()
        await harness.stop()
        await web.triggerGracefulShutdown()
        await other.triggerGracefulShutdown()
        await partner.triggerGracefulShutdown()
    }

    /// A local HTTP server: /ok (JSON), /slow (3 s), /big (256 KiB), and POST /translate answering as
    /// LibreTranslate does (500 for the text "hello"); `routes` adds more.
    static func startWebServer(routes: (Router<BasicRequestContext>) -> Void = { _ in }) async throws -> (ServiceGroup, Int) {
        let router = Router()
        routes(router)
        router.get("/ok") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"hello":"world"}"#))
            )
        }
        router.get("/slow") { _, _ -> String in
            try await Task.sleep(for: .seconds(3))
            return "late"
        }
        router.get("/big") { _, _ in String(repeating: "x", count: 256 << 10) }
        router.post("/translate") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 16)
            let fields = (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any] ?? [:]
            let q = fields["q"] as? String ?? ""
            guard q != "hello" else { return Response(status: .internalServerError) }
            let answer = try JSONSerialization.data(withJSONObject: [
                "translatedText": "[\(fields["target"] as? String ?? "?") \(fields["api_key"] as? String ?? "")] \(q)"
            ])
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: answer)))
        }
        return try await startLoopbackWebServer(router.buildResponder(), label: "the web server")
    }
}

/// Requests counted by a test's HTTP listener.
final class Hits: Sendable {
    private let value = Mutex(0)
    var count: Int { value.withLock { $0 } }
    func add() { value.withLock { $0 += 1 } }
}
