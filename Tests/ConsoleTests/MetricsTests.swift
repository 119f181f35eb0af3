import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import XCTest

/// `/metrics` after a scripted exchange: it parses as Prometheus text, and the counters moved by exactly
/// what the exchange did.
final class MetricsTests: XCTestCase {
    func testCountersAfterAScriptedExchange() async throws {
        let harness = try await ConsoleHarness.start()
        let (tom, lobby, tomEvents) = try await harness.lobbyMember("Tom")
        let (jerry, _, jerryEvents) = try await harness.lobbyMember("Jerry")
        let before = try await metrics(harness)

        for text in ["hello 1", "hello 2", "hello 3"] { _ = try await lobby.send(.text(text)) }
        try await lobby.sendRefused("a scam")
        _ = try await lobby.send(.text("ping"))
        _ = try await tomEvents.next("pong for Tom") { $0.receivedMessage?.content.text == "pong, Tom!" ? true : nil }
        _ = try await jerryEvents.next("pong for Jerry") { $0.receivedMessage?.content.text == "pong, Tom!" ? true : nil }
        // The pong's delivery is counted just after its frames are written, so Tom and Jerry may have it a
        // moment before /metrics does: wait for that count, then compare every series exactly.
        var after = try await metrics(harness)
        try await eventually("the pong's deliveries to be counted") {
            after = try await self.metrics(harness)
            return (after["hookbot_messages_delivered_total"] ?? 0) - (before["hookbot_messages_delivered_total"] ?? 0) >= 10
        }

        func delta(_ series: String) -> Double { (after[series] ?? 0) - (before[series] ?? 0) }
        // Tom's three hellos and ping, and the bot's pong.
        XCTAssertEqual(delta("hookbot_messages_stored_total"), 5)
        XCTAssertEqual(delta("hookbot_commit_batch_messages_sum"), 5)
        XCTAssertEqual(delta("hookbot_delivery_latency_seconds_count"), 5)
        XCTAssertGreaterThanOrEqual(delta("hookbot_commit_latency_seconds_count"), 1)
        // Each of Tom's four reaches Jerry and the bot; the pong reaches Tom and Jerry.
        XCTAssertEqual(delta("hookbot_messages_delivered_total"), 10)
        XCTAssertEqual(delta(#"hookbot_commands_total{cmd="direct",op=""}"#), 6)
        XCTAssertEqual(delta(#"hookbot_command_errors_total{cmd="direct",code="4402",op=""}"#), 1)
        // Tom's five messages were reviewed (the interceptor's own are not); one was blocked.
        XCTAssertEqual(delta("hookbot_interception_requests_total"), 5)
        XCTAssertEqual(delta(#"hookbot_interception_verdicts_total{verdict="allow"}"#), 4)
        XCTAssertEqual(delta(#"hookbot_interception_verdicts_total{verdict="drop"}"#), 1)
        XCTAssertEqual(delta("hookbot_interception_timeouts_total"), 0)
        // Each reviewed message's hold (request to verdict applied), the blocked one too.
        XCTAssertEqual(delta("hookbot_interception_hold_seconds_count"), 5)
        // Moderation ran for the five reviews and for the bot's own pong; the greeter for the four delivered.
        XCTAssertEqual(delta(#"hookbot_hook_calls_total{hook="moderation",plugin="moderation"}"#), 6)
        XCTAssertEqual(delta(#"hookbot_hook_duration_seconds_count{hook="moderation",plugin="moderation"}"#), 6)
        XCTAssertEqual(delta(#"hookbot_hook_calls_total{hook="on_receive",plugin="greeter"}"#), 4)
        XCTAssertEqual(delta(#"hookbot_hook_failures_total{hook="on_receive",plugin="greeter"}"#), 0)
        XCTAssertEqual(delta(#"hookbot_bot_actions_total{action="send"}"#), 1)
        XCTAssertEqual(delta(#"hookbot_bot_action_errors_total{action="send"}"#), 0)
        // Gauges: Tom and Jerry over JSON WebSockets, the bot in process.
        XCTAssertEqual(after[#"hookbot_sessions{format="json"}"#], 2)
        XCTAssertEqual(after[#"hookbot_connections{format="json"}"#], 2)
        XCTAssertEqual(after[#"hookbot_sessions{format="in_process"}"#], 1)
        XCTAssertEqual(after[#"hookbot_plugin_loads_total{plugin="greeter",result="ok"}"#], 1)

        await jerry.close()
        try await eventually("Jerry's session to end") {
            try await self.metrics(harness)[#"hookbot_sessions{format="json"}"#] == 1
        }
        await tom.close()
        await harness.stop()
    }

    func testABreakerTripAndAFailedReloadAreCounted() async throws {
        let harness = try await ConsoleHarness.start(plugins: [
            "fragile.lua": """
            return { name = "fragile", on_receive = function(msg, ctx) error("always fails") end }
            """
        ]) { $0.plugins.limits.breakerThreshold = 2 }
        let (tom, lobby, _) = try await harness.lobbyMember("Tom")
        for text in ["one", "two"] { _ = try await lobby.send(.text(text)) }
        try await eventually("the breaker to trip") {
            try await harness.plugin("fragile")["state"] as? String == "disabled"
        }
        try "return {".write(to: harness.directory.appendingPathComponent("plugins/fragile.lua"), atomically: true, encoding: .utf8)
        let report = try await harness.admin("POST", "/api/plugins/fragile/reload").object()
        XCTAssertEqual((report["errors"] as? [[String: Any]])?.count, 1)
        let values = try await metrics(harness)
        XCTAssertEqual(values[#"hookbot_hook_failures_total{hook="on_receive",plugin="fragile"}"#], 2)
        XCTAssertEqual(values[#"hookbot_plugin_breaker_trips_total{plugin="fragile"}"#], 1)
        XCTAssertEqual(values[#"hookbot_plugin_loads_total{plugin="fragile",result="failed"}"#], 1)
        let plugin = try await harness.plugin("fragile")
        XCTAssertEqual(plugin["breakerTrips"] as? Int, 1)
        await tom.close()
        await harness.stop()
    }

    /// `GET /metrics`, checked to be Prometheus text (format 0.0.4) and read into "name{sorted labels}" → value.
    private func metrics(_ harness: ConsoleHarness) async throws -> [String: Double] {
        let answer = try await harness.http("GET", "/metrics")
        XCTAssertEqual(answer.status, 200)
        XCTAssertEqual(answer.contentType, "text/plain; version=0.0.4; charset=utf-8")
        return try PrometheusText.parse(answer.text)
    }
}

/// A reader of the Prometheus text exposition format, strict enough to catch malformed output: every
/// sample belongs to a family declared by a `# TYPE` line before it, names and labels are well-formed,
/// values are numbers, and no series appears twice.
enum PrometheusText {
    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    static func parse(_ text: String) throws -> [String: Double] {
        var types: [String: String] = [:]
        var values: [String: Double] = [:]
        let name = #"[a-zA-Z_:][a-zA-Z0-9_:]*"#
        let sample = try Regex(#"^(\#(name))(\{(.*)\})? (\S+)$"#)
        let label = try Regex(#"([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?"#)
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                guard parts.count == 4, ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[3]) else {
                    throw Malformed(description: "bad TYPE line: \(line)")
                }
                types[String(parts[2])] = String(parts[3])
                continue
            }
            if line.hasPrefix("#") { continue }
            guard let match = try sample.wholeMatch(in: line) else { throw Malformed(description: "bad sample line: \(line)") }
            let metric = String(match.output[1].substring ?? "")
            let family =
                types[metric] != nil
                ? metric
                : ["_bucket", "_sum", "_count"].compactMap { suffix in
                    metric.hasSuffix(suffix) ? String(metric.dropLast(suffix.count)) : nil
                }.first { types[$0] == "histogram" }
            guard family != nil else { throw Malformed(description: "sample before its TYPE line: \(line)") }
            var labels: [String] = []
            if let body = match.output[3].substring, !body.isEmpty {
                var rest = body[...]
                while !rest.isEmpty {
                    guard let pair = try label.prefixMatch(in: rest) else { throw Malformed(description: "bad labels: \(line)") }
                    labels.append("\(pair.output[1].substring ?? "")=\"\(pair.output[2].substring ?? "")\"")
                    rest = rest[pair.range.upperBound...]
                }
            }
            let valueText = String(match.output[4].substring ?? "")
            guard let value = Double(valueText) ?? (valueText == "+Inf" ? .infinity : nil) else {
                throw Malformed(description: "bad value: \(line)")
            }
            let key = labels.isEmpty ? metric : "\(metric){\(labels.sorted().joined(separator: ","))}"
            guard values.updateValue(value, forKey: key) == nil else { throw Malformed(description: "series twice: \(key)") }
        }
        return values
    }
}
