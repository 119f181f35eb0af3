import BotHost
import Crypto
import Foundation
import HookbotTestSupport
import IMClient
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `POST /hooks/<plugin>/<path>` on a real embedded server: secrets, signatures, limits, and a plugin that
/// posts a CI result into a conversation.
final class WebhookTests: XCTestCase {
    static let secret = "ci-secret-0123456789"
    static let ci = """
        return { name = "ci",
          on_http = function(req, ctx)
            if req.path == "/fail" then error("boom") end
            if req.path == "/odd" then return 42 end
            ctx.state.incr("calls")
            local j = req.json or {}
            ctx.send(j.cid, "CI " .. tostring(j.result) .. " for " .. tostring(j.commit) .. " (" .. req.path .. ")")
            return { status = 202, body = { accepted = true, path = req.path, x = req.query.x, agent = req.headers["user-agent"] },
                     headers = { ["X-CI"] = "yes" } }
          end }
        """

    private func post(_ harness: ConsoleHarness, _ path: String, body: String, headers: [String: String]) async throws
        -> (status: Int, body: String, headers: [AnyHashable: Any])
    {
        var request = URLRequest(url: URL(string: harness.base + path)!)
        request.httpMethod = "POST"
        request.httpBody = Data(body.utf8)
        request.setValue("hookbot-test", forHTTPHeaderField: "User-Agent")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        return (http.statusCode, String(decoding: data, as: UTF8.self), http.allHeaderFields)
    }

    private func calls(_ harness: ConsoleHarness) async throws -> Int {
        let state = try await harness.admin("GET", "/api/plugins/ci/state").object()
        return (state["entries"] as? [[String: Any]])?.first { $0["key"] as? String == "calls" }?["value"] as? Int ?? 0
    }

    func testWebhooksWithSecretsSignaturesAndLimits() async throws {
        let harness = try await ConsoleHarness.start(plugins: ConsoleHarness.plugins.merging(["ci.lua": Self.ci]) { _, new in new }) {
            $0.webhooks.secrets = ["ci": Self.secret, "greeter": "greeter-secret-0123456"]
            $0.webhooks.maxBytes = 1024
        }
        let (tom, _, events) = try await harness.lobbyMember("Tom")
        let body = #"{"cid": "\#(harness.hub.lobbyID)", "result": "passed", "commit": "abc123"}"#

        let accepted = try await post(harness, "/hooks/ci/build/42?x=1", body: body, headers: ["X-Hookbot-Secret": Self.secret])
        XCTAssertEqual(accepted.status, 202, accepted.body)
        let answer = try JSONSerialization.jsonObject(with: Data(accepted.body.utf8)) as? [String: Any]
        XCTAssertEqual(answer?["accepted"] as? Bool, true)
        XCTAssertEqual(answer?["path"] as? String, "/build/42")
        XCTAssertEqual(answer?["x"] as? String, "1")
        XCTAssertEqual(answer?["agent"] as? String, "hookbot-test")
        XCTAssertEqual(accepted.headers["x-ci"] as? String ?? accepted.headers["X-Ci"] as? String, "yes")
        let posted = try await events.next("the CI result") { $0.receivedMessage?.content.text }
        XCTAssertEqual(posted, "CI passed for abc123 (/build/42)")

        // Signed as GitHub signs.
        let mac = HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: SymmetricKey(data: Data(Self.secret.utf8)))
        let signature = "sha256=" + mac.map { String(format: "%02x", $0) }.joined()
        let signed = try await post(harness, "/hooks/ci", body: body, headers: ["X-Hub-Signature-256": signature])
        XCTAssertEqual(signed.status, 202, signed.body)
        _ = try await events.next("the second CI result") { $0.receivedMessage?.content.text == "CI passed for abc123 (/)" ? true : nil }
        let counted = try await calls(harness)
        XCTAssertEqual(counted, 2)

        // Refused before anything runs.
        let refusals: [(String, [String: String], String, Int)] = [
            ("/hooks/ci/x", ["X-Hookbot-Secret": "wrong-secret-0123456789"], body, 401),
            ("/hooks/ci/x", [:], body, 401),
            ("/hooks/ci/x", ["X-Hub-Signature-256": "sha256=" + String(repeating: "0", count: 64)], body, 401),
            ("/hooks/ci/x", ["X-Hub-Signature-256": signature], body + " ", 401),
            ("/hooks/nobody/x", ["X-Hookbot-Secret": Self.secret], body, 404),
            ("/hooks/greeter/x", ["X-Hookbot-Secret": "greeter-secret-0123456"], body, 404),
            ("/hooks/ci/x", ["X-Hookbot-Secret": Self.secret], String(repeating: "x", count: 2000), 413),
        ]
        for (path, headers, payload, status) in refusals {
            let refused = try await post(harness, path, body: payload, headers: headers)
            XCTAssertEqual(refused.status, status, "\(path) \(headers): \(refused.body)")
            let reason = (try JSONSerialization.jsonObject(with: Data(refused.body.utf8)) as? [String: Any])?["reason"] as? String
            XCTAssertFalse(reason?.isEmpty ?? true, refused.body)
        }
        let unchanged = try await calls(harness)
        XCTAssertEqual(unchanged, 2, "nothing ran for refused requests")

        // A failing or odd hook is a 500 with the reason; the bot goes on.
        let failed = try await post(harness, "/hooks/ci/fail", body: body, headers: ["X-Hookbot-Secret": Self.secret])
        XCTAssertEqual(failed.status, 500)
        XCTAssertTrue(failed.body.contains("boom"), failed.body)
        let odd = try await post(harness, "/hooks/ci/odd", body: body, headers: ["X-Hookbot-Secret": Self.secret])
        XCTAssertEqual(odd.status, 500)
        XCTAssertTrue(odd.body.contains("on_http returned a number"), odd.body)
        let again = try await post(harness, "/hooks/ci/again", body: body, headers: ["X-Hookbot-Secret": Self.secret])
        XCTAssertEqual(again.status, 202)
        await tom.close()
        await harness.stop()
    }

    /// The path `on_http` gets is normalised (percent-decoded, `//` and trailing `/` collapsed, `.` and `..`
    /// resolved without leaving the webhook's root); paths that encode a `/`, a control character or bad
    /// UTF-8 are refused with 400 and a reason before anything runs. Sent over a raw socket, so that no
    /// client library tidies the path first.
    func testWebhookPathsAreNormalised() async throws {
        let harness = try await ConsoleHarness.start(plugins: ["ci.lua": Self.ci]) {
            $0.webhooks.secrets = ["ci": Self.secret]
        }
        let body = #"{"cid": "\#(harness.hub.lobbyID)", "result": "passed", "commit": "abc123"}"#
        let cases: [(target: String, path: String)] = [
            ("/hooks/ci", "/"),
            ("/hooks/ci/", "/"),
            ("/hooks/ci//build///42/", "/build/42"),
            ("/hooks/ci/a/./b/../c", "/a/c"),
            ("/hooks/ci/../../../etc/passwd", "/etc/passwd"),
            ("/hooks/ci/a/%2E%2E/%2e%2e/%2E/b", "/b"),
            ("/hooks/ci/%62uild/%E2%9C%93?x=1", "/build/✓"),
            ("/hooks/ci/a%20b/c", "/a b/c"),
        ]
        for (target, path) in cases {
            let answer = try await Self.rawPost(port: harness.port, target: target, body: body, secret: Self.secret)
            XCTAssertEqual(answer.status, 202, "\(target): \(answer.body)")
            let fields = (try? JSONSerialization.jsonObject(with: Data(answer.body.utf8))) as? [String: Any]
            XCTAssertEqual(fields?["path"] as? String, path, target)
        }
        let calls = try await calls(harness)
        XCTAssertEqual(calls, cases.count)
        for target in ["/hooks/ci/a%2Fb", "/hooks/ci/a%5Cb", "/hooks/ci/a%00b", "/hooks/ci/x/%0A", "/hooks/ci/%zz", "/hooks/ci/%FF%FE"] {
            let answer = try await Self.rawPost(port: harness.port, target: target, body: body, secret: Self.secret)
            XCTAssertEqual(answer.status, 400, "\(target): \(answer.body)")
            let fields = (try? JSONSerialization.jsonObject(with: Data(answer.body.utf8))) as? [String: Any]
            XCTAssertEqual(fields?["code"] as? Int, 400, target)
            XCTAssertFalse((fields?["reason"] as? String ?? "").isEmpty, "\(target): \(answer.body)")
        }
        let unchanged = try await self.calls(harness)
        XCTAssertEqual(unchanged, cases.count, "nothing ran for refused paths")
        await harness.stop()
    }

    /// One `POST target HTTP/1.1` with the secret, written as is to a socket; the status and body.
    static func rawPost(port: Int, target: String, body: String, secret: String) async throws -> (status: Int, body: String) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        let fd = try connectLoopback(port: port)
                        defer { close(fd) }
                        let request = Array(
                            ("POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Hookbot-Secret: \(secret)\r\n"
                                + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8)
                        var sent = 0
                        while sent < request.count {
                            let written = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
                            guard written > 0 else { throw POSIXError(.EPIPE) }
                            sent += written
                        }
                        var timeout = timeval(tv_sec: 10, tv_usec: 0)
                        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                        var received: [UInt8] = []
                        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
                        while true {
                            let count = recv(fd, &buffer, buffer.count, 0)
                            if count <= 0 { break }
                            received += buffer[0..<count]
                        }
                        let text = String(decoding: received, as: UTF8.self)
                        guard let end = text.range(of: "\r\n\r\n"), let status = Int(text.split(separator: " ").dropFirst().first ?? "")
                        else { throw TestFailure("no HTTP answer to \(target): \(text)") }
                        return (status, String(text[end.upperBound...]))
                    })
            }
        }
    }
}
