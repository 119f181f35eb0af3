import BotHost
import Foundation
import HookRuntime
import HookbotTestSupport
import IMClient
import XCTest

/// `GET /api/trace` and `GET /api/trace/:id` on an embedded server whose bot is its interceptor: members
/// send through the SDK at a human pace, the real plugins decide, and the trace tells why.
final class TraceAPITests: XCTestCase {
    /// Traces, newest first.
    private func traces(_ harness: ConsoleHarness, _ query: String = "") async throws -> [[String: Any]] {
        let answer = try await harness.admin("GET", "/api/trace?limit=50" + query)
        XCTAssertEqual(answer.status, 200, answer.text)
        return try answer.object()["traces"] as? [[String: Any]] ?? []
    }

    private func steps(_ trace: [String: Any]) -> [[String: Any]] { trace["steps"] as? [[String: Any]] ?? [] }

    /// The trace of message `id` once it has a step of `kind` (waiting for it), and that step.
    private func trace(
        _ harness: ConsoleHarness, _ id: String, withStep kind: String, _ what: String
    ) async throws -> (trace: [String: Any], step: [String: Any]) {
        var trace: [String: Any] = [:]
        try await eventually(what) {
            let answer = try await harness.admin("GET", "/api/trace/\(id)")
            guard answer.status == 200 else { return false }
            trace = try answer.object()
            return steps(trace).contains { $0["kind"] as? String == kind }
        }
        return (trace, try XCTUnwrap(steps(trace).first { $0["kind"] as? String == kind }))
    }

    func testABlockedMessageAndAnAnsweredOneTellWhatHappened() async throws {
        let harness = try await startConsole()
        let (tom, lobby, _) = try await harness.lobbyMember("Tom")
        addTeardownBlock(releasing: tom) { await $0.close() }

        let ping = try await lobby.send(.text("ping"))
        let blockedText = "快来看 scam 链接 🎁"
        try await lobby.sendRefused(blockedText)

        // The blocked message: reviewed, refused by the moderation plugin with its reason, never delivered.
        var blocked: [String: Any] = [:]
        try await eventually("the blocked message's trace") {
            blocked = try await traces(harness, "&blocked=1").first { $0["text"] as? String == blockedText } ?? [:]
            return !blocked.isEmpty
        }
        XCTAssertEqual(blocked["from"] as? String, "Tom")
        XCTAssertEqual(blocked["cid"] as? String, harness.hub.lobbyID)
        XCTAssertEqual(blocked["blocked"] as? Bool, true)
        XCTAssertEqual(blocked["reviewed"] as? Bool, true)
        XCTAssertEqual(blocked["decidedBy"] as? String, "moderation")
        XCTAssertEqual(blocked["reason"] as? String, "scam links are not allowed here")
        XCTAssertEqual(blocked["messageId"] as? String, "")
        let blockedSteps = steps(blocked)
        XCTAssertEqual(blockedSteps.first?["kind"] as? String, "review")
        let hook = try XCTUnwrap(blockedSteps.first { $0["kind"] as? String == "hook" }, "\(blockedSteps)")
        XCTAssertEqual(hook["plugin"] as? String, "moderation")
        XCTAssertEqual(hook["hook"] as? String, "moderation")
        XCTAssertNotNil(hook["micros"] as? Int)
        XCTAssertEqual(hook["text"] as? String, "block: scam links are not allowed here (appCode 17)")
        XCTAssertTrue(blockedSteps.contains { ($0["text"] as? String ?? "").hasPrefix("answered drop: scam links") }, "\(blockedSteps)")
        XCTAssertFalse(blockedSteps.contains { $0["kind"] as? String == "delivered" }, "\(blockedSteps)")

        // The ping: reviewed and allowed, delivered under its id, answered by the greeter.
        let (answered, sent) = try await trace(harness, ping.id, withStep: "sent", "the pong in the ping's trace")
        XCTAssertEqual(answered["messageId"] as? String, ping.id)
        XCTAssertEqual(answered["blocked"] as? Bool, false)
        XCTAssertEqual(answered["verdict"] as? String, "allowed")
        let kinds = steps(answered).map { $0["kind"] as? String ?? "" }
        XCTAssertEqual(kinds.first, "review")
        XCTAssertTrue(kinds.contains("delivered"), "\(kinds)")
        let receive = try XCTUnwrap(steps(answered).first { $0["hook"] as? String == "on_receive" })
        XCTAssertEqual(receive["plugin"] as? String, "greeter")
        XCTAssertEqual(receive["text"] as? String, "asked for log, reply")
        XCTAssertEqual(sent["text"] as? String, "message to \(harness.hub.lobbyID): \"pong, Tom!\"")
        XCTAssertEqual(sent["plugin"] as? String, "greeter")
        // Steps are in order of time.
        let times = steps(answered).compactMap { $0["at"] as? Double }
        XCTAssertEqual(times, times.sorted())

        // Recent verdicts: both, newest first; the same trace by its number.
        let verdicts = try await traces(harness, "&verdicts=1")
        XCTAssertEqual(verdicts.prefix(2).compactMap { $0["text"] as? String }.sorted(), [blockedText, "ping"].sorted())
        let number = try XCTUnwrap(blocked["id"] as? Int)
        let byNumber = try await harness.admin("GET", "/api/trace/\(number)").object()
        XCTAssertEqual(byNumber["text"] as? String, blockedText)

        // Bad requests: a clear code and reason.
        let unknown = try await harness.admin("GET", "/api/trace/no-such-message")
        XCTAssertEqual(unknown.status, 404)
        XCTAssertTrue(try unknown.object()["reason"] as? String ?? "" != "", unknown.text)
        for query in ["limit=0", "limit=501", "limit=many", "blocked=yes"] {
            let bad = try await harness.admin("GET", "/api/trace?" + query)
            XCTAssertEqual(bad.status, 400, query)
            XCTAssertEqual(try bad.object()["code"] as? Int, 400, bad.text)
        }
        let anonymous = try await harness.http("GET", "/api/trace")
        XCTAssertEqual(anonymous.status, 401)
    }

    /// Replies the bot did not send are in the trace with why: the reply limit, a command's cooldown.
    func testSkippedRepliesShowWhy() async throws {
        var plugins = ConsoleHarness.plugins
        plugins["dice.lua"] = """
            return {
              name = "dice",
              on_load = function(ctx)
                ctx.commands.add{ name = "roll", cooldown = 60, description = "roll a die",
                  run = function(args, msg, ctx) ctx.reply(msg.from .. " rolled 4") end }
              end,
            }
            """
        let harness = try await startConsole(plugins: plugins) { $0.replyLimit = 2 }
        let (tom, lobby, _) = try await harness.lobbyMember("Tom")
        addTeardownBlock(releasing: tom) { await $0.close() }

        let first = try await lobby.send(.text("!roll"))
        try await harness.eventuallyAdmin("/api/trace/\(first.id)", contains: "Tom rolled 4")
        let again = try await lobby.send(.text("!roll"))
        let (_, skipped) = try await trace(harness, again.id, withStep: "skipped", "the second roll's trace")
        XCTAssertEqual(skipped["plugin"] as? String, "dice")
        XCTAssertEqual(skipped["hook"] as? String, "!roll")
        XCTAssertTrue((skipped["text"] as? String ?? "").hasPrefix("cooldown: "), "\(skipped)")

        // Two replies went out in this window (roll, "wait"): the third is held back by the reply limit.
        let third = try await lobby.send(.text("ping"))
        let (limited, held) = try await trace(harness, third.id, withStep: "skipped", "the ping's trace with its reply held back")
        XCTAssertEqual(held["text"] as? String, "\"pong, Tom!\" not sent: rate limit")
        XCTAssertEqual(held["plugin"] as? String, "greeter")
        XCTAssertFalse(steps(limited).contains { $0["kind"] as? String == "sent" })
    }

    /// The store keeps the last `capacity` traces and each trace at most `maxSteps` steps.
    func testTracesAreCapped() throws {
        let store = MessageTraceStore(capacity: 3)
        for n in 1...5 {
            let trace = try XCTUnwrap(store.delivered(HookMessage(id: "m\(n)", cid: "c", from: "Tom", type: -1, text: "第\(n)条 🙂")))
            for step in 0..<(MessageTrace.maxSteps + 10) { trace.add(.hook, plugin: "p", "step \(step)") }
        }
        let kept = store.recent(limit: 10)
        XCTAssertEqual(kept.map(\.messageId), ["m5", "m4", "m3"])
        XCTAssertEqual(kept.map(\.steps.count), [MessageTrace.maxSteps, MessageTrace.maxSteps, MessageTrace.maxSteps])
        XCTAssertEqual(kept.map(\.dropped), [10, 10, 10])
        XCTAssertNil(store.trace("m1"))
        XCTAssertEqual(store.trace("m4")?.text, "第4条 🙂")
        let long = MessageTrace(messageID: "x", cid: "c", from: "Tom", text: String(repeating: "长", count: 1000))
        XCTAssertEqual(long.snapshot.text.count, MessageTrace.maxText)
        // Characters are counted, not bytes: 300 characters of 3 and of 8 bytes each are kept whole.
        for text in [String(repeating: "长", count: MessageTrace.maxText), String(repeating: "🇫🇷", count: MessageTrace.maxText)] {
            XCTAssertEqual(MessageTrace(messageID: "x", cid: "c", from: "Tom", text: text).snapshot.text, text)
        }
        let ascii = MessageTrace(messageID: "x", cid: "c", from: "Tom", text: String(repeating: "a", count: MessageTrace.maxText + 1))
        XCTAssertEqual(ascii.snapshot.text, String(repeating: "a", count: MessageTrace.maxText - 1) + "…")
        // Off: no trace is made.
        let off = MessageTraceStore.fromEnvironment(["HOOKBOT_TRACES": "0"])
        XCTAssertNil(off.delivered(HookMessage(id: "m", cid: "c", from: "Tom", text: "hi")))
        XCTAssertEqual(off.recent(limit: 10), [])
        XCTAssertEqual(MessageTraceStore.fromEnvironment([:]).capacity, 500)
    }

    /// A reviewed message's delivery continues its review's trace; at most `capacity` reviews wait for theirs,
    /// oldest forgotten first, however many reviews were delivered before (their keys no longer count), and a
    /// second review of the same message takes the waiting place without moving it.
    func testReviewsWaitForTheirDeliveryOldestForgottenFirst() throws {
        let store = MessageTraceStore(capacity: 3)
        func message(_ text: String, id: String = "") -> HookMessage { HookMessage(id: id, cid: "c", from: "Tom", text: text) }
        func review(_ text: String) throws -> MessageTrace {
            let trace = try XCTUnwrap(store.review(message(text)))
            store.awaitDelivery(trace, as: message(text))
            return trace
        }
        for n in 0..<1_000 {
            let reviewed = try review("ping \(n % 7)")
            XCTAssertTrue(store.delivered(message("ping \(n % 7)", id: "p\(n)")) === reviewed)
        }
        let a = try review("a")
        let b = try review("b")
        _ = try review("c")
        let c = try review("c") // the same message again: its place, not a newer one
        let d = try review("d") // a fourth: "a" is forgotten
        XCTAssertFalse(store.delivered(message("a", id: "ma")) === a)
        XCTAssertTrue(store.delivered(message("b", id: "mb")) === b)
        XCTAssertTrue(store.delivered(message("c", id: "mc")) === c)
        XCTAssertTrue(store.delivered(message("d", id: "md")) === d)
        XCTAssertEqual(b.snapshot.steps.last?.text, "delivered as mb")
        // Delivered, none waits any more: a delivery makes a trace of its own.
        XCTAssertFalse(store.delivered(message("b", id: "mb2")) === b)
        // Three more wait ("b" again among them), then "e" pushes out "f", the oldest of them: not "b", whose
        // first review came before.
        let f = try review("f")
        let b2 = try review("b")
        let g = try review("g")
        let e = try review("e")
        XCTAssertFalse(store.delivered(message("f", id: "mf")) === f)
        for (text, trace) in [("b", b2), ("g", g), ("e", e)] {
            XCTAssertTrue(store.delivered(message(text, id: "m" + text + "2")) === trace, text)
        }
    }
}
