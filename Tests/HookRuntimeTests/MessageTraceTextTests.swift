import XCTest

@testable import HookRuntime

/// A trace's steps keep their parts and make their texts when read (`MessageTrace.Detail`): the texts must be the
/// ones the steps' callers used to make by interpolation and cut to `maxText` (the `old…` functions below are that
/// code, as it was), for short, empty, Chinese, emoji and long parts, and a part must not keep a long text whole.
final class MessageTraceTextTests: XCTestCase {
    private let samples: [String] = [
        "spam", "", "大家好 👋", String(repeating: "a", count: MessageTrace.maxText - 5),
        String(repeating: "长", count: 1000), String(repeating: "🇫🇷", count: 400), "\u{301}" + String(repeating: "a", count: 400),
    ]
    private var optionals: [String?] { [nil] + samples }

    /// The text of the one step `add` makes in a new trace.
    private func text(_ add: (MessageTrace) -> Void) -> String {
        let trace = MessageTrace(messageID: "m", cid: "c", from: "Tom", text: "hi")
        add(trace)
        XCTAssertEqual(trace.snapshot.steps.count, 1)
        return trace.snapshot.steps.first?.text ?? ""
    }

    private func check(_ detail: MessageTrace.Detail, _ old: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(text { $0.add(.skipped, detail) }, MessageTrace.cut(old), file: file, line: line)
    }

    func testRoutingAndReviewStepsSayWhatTheyUsedTo() {
        for a in samples {
            check(.text(a), a)
            check(.deliveredAs(a), "delivered as \(a)")
            check(.replaced(text: a), "text replaced with \"\(a)\"")
            check(.receives(text: a, type: -1), "on_receive gets \"\(a)\"")
            for b in samples.prefix(4) {
                check(.reviewAsked(kind: b, budget: a), "the server asked for a review (\(b), budget \(a))")
                check(.reviewAsked(kind: a, budget: b), "the server asked for a review (\(a), budget \(b))")
                for transient in [false, true] {
                    check(
                        .sent(transient: transient, cid: b, text: a),
                        "\(transient ? "transient message" : "message") to \(b): \"\(a)\"")
                }
            }
            for b in optionals {
                check(.reviewAnswered(verdict: a, reason: b), "answered \(a)" + (b.map { ": \($0)" } ?? ""))
                check(.notSent(text: a, by: "rate limit", reason: b), "\"\(a)\" not sent: rate limit" + (b.map { " (\($0))" } ?? ""))
                check(.notSent(text: "hi", by: a, reason: b), "\"hi\" not sent: \(a)" + (b.map { " (\($0))" } ?? ""))
                check(.dropped(by: b, reason: a), "dropped by \(b ?? "before_send")" + ": \(a)")
                check(.dropped(by: a, reason: b), "dropped by \(a)" + (b.map { ": \($0)" } ?? ""))
                for code in [nil, 17] as [Int?] {
                    for silent in [false, true] {
                        check(.blocked(by: b, reason: a, code: code, silent: silent), oldBlocked(b, a, code, silent))
                        check(.blocked(by: a, reason: b, code: code, silent: silent), oldBlocked(a, b, code, silent))
                    }
                }
            }
        }
        check(.receives(text: nil, type: 3), "on_receive gets \"3\"")
        check(.dropped(by: nil, reason: nil), "dropped by before_send")
        check(.loopGuard(hops: 2), "not answered (loop guard): it carries 2 bot hops, the most answered is max_hops")
    }

    func testActionStepsSayWhatTheyUsedTo() {
        for a in samples {
            for b in optionals {
                let actions: [HookAction.Kind] = [
                    .mute(cid: "c", user: a, seconds: 60, reason: b), .mute(cid: "c", user: a, seconds: nil, reason: b),
                    .kick(cid: "c", user: a, reason: b), .warn(cid: "c", user: a, reason: b), .block(cid: "c", user: a, blocked: true),
                    .add(cid: "c", user: a), .sendCommand(cid: "c", command: HookCommand(action: a)), .recall(cid: "c", messageID: "m"),
                ]
                for kind in actions {
                    let action = HookAction(plugin: "p", kind: kind)
                    check(.action("mute", in: b ?? "c", action), "mute in \(b ?? "c")" + oldTarget(action))
                }
            }
        }
    }

    func testHookStepsSayWhatTheyUsedTo() {
        let actions: [[HookAction]] = [
            [],
            [HookAction(plugin: "p", kind: .send(cid: "c", message: HookMessage(id: "", cid: "c", from: "bot", text: "hi"), replyTo: nil))],
            [
                HookAction(plugin: "p", kind: .log(level: .info, message: "x")),
                HookAction(plugin: "p", kind: .kick(cid: "c", user: "u", reason: nil)),
            ],
            Array(repeating: HookAction(plugin: "p", kind: .kick(cid: "c", user: "u", reason: nil)), count: 100),
        ]
        var values: [(Any, HookName)] = [(ModerationVerdict.allow, .moderation), (true, .moderation)]
        for a in samples {
            values += [
                (a, .beforeSend), (false, .beforeSend), (a, .translate), (ModerationVerdict.replace(text: a), .moderation),
                (ModerationVerdict.block(reason: a, code: 17, silent: true), .moderation),
                (ModerationVerdict.block(reason: a, code: nil, silent: false), .membership),
                (ModerationVerdict.block(reason: nil, code: 4, silent: false), .moderation),
            ]
        }
        for (value, hook) in values {
            for asked in actions {
                for error in [
                    nil, HookError(plugin: "p", hook: "h", reason: .runtime(samples[4])),
                    HookError(plugin: "p", hook: "h", reason: .deadline),
                ] {
                    let outcome = MessageTrace.describe(value, hook: hook)
                    let made = text { $0.hook("p", "h", nanos: 1_000, outcome: outcome, actions: asked, error: error) }
                    XCTAssertEqual(made, MessageTrace.cut(oldHook(oldDescribe(value, hook: hook), asked, error)), "\(value) \(hook)")
                }
            }
        }
    }

    func testVerdictsAndReviewsSetTheirFacts() {
        let trace = MessageTrace(messageID: "m", cid: "c", from: "Tom", text: "hi")
        XCTAssertFalse(trace.heading.hasVerdict)
        trace.reviewed(.reviewAsked(kind: "message", budget: "200 ms"))
        trace.verdict(.blocked(by: "filter", reason: samples[4], code: 17, silent: false), plugin: "filter")
        let snapshot = trace.snapshot
        XCTAssertTrue(snapshot.reviewed)
        XCTAssertTrue(trace.heading.hasVerdict)
        XCTAssertEqual(snapshot.verdict, MessageTrace.cut(oldBlocked("filter", samples[4], 17, false)))
        XCTAssertEqual(snapshot.steps.map(\.kind), [.review, .verdict])
        XCTAssertEqual(snapshot.steps.last?.plugin, "filter")
        trace.verdict("allowed")
        XCTAssertEqual(trace.snapshot.verdict, "allowed")
    }

    /// A step's parts are cut when it is made: a plugin's long text is not kept whole until the trace is read.
    func testLongPartsAreCutWhenKept() throws {
        let long = String(repeating: "长", count: 100_000)
        let kept: [MessageTrace.Detail] = [
            .text(long), .sent(transient: false, cid: long, text: long), .notSent(text: long, by: long, reason: long),
            .blocked(by: long, reason: long, code: nil, silent: false), .replaced(text: long), .receives(text: long, type: 0),
            .action("warn", in: long, HookAction(plugin: "p", kind: .warn(cid: "c", user: long, reason: long))),
            .hook(outcome: MessageTrace.describe(ModerationVerdict.replace(text: long), hook: .moderation), asked: nil, error: nil),
        ]
        for detail in kept {
            let strings = Mirror.strings(in: detail)
            XCTAssertFalse(strings.isEmpty, "\(detail.parts)")
            for string in strings { XCTAssertLessThanOrEqual(string.count, MessageTrace.maxText, "\(detail.parts)") }
        }
    }

    // MARK: - The texts as they were made before the steps kept their parts

    private func oldBlocked(_ by: String?, _ reason: String?, _ code: Int?, _ silent: Bool) -> String {
        var said = "blocked by \(by ?? "moderation")"
        if let reason { said += ": \(reason)" }
        if let code { said += " (appCode \(code))" }
        if silent { said += "; the sender is not told" }
        return said
    }

    private func oldTarget(_ action: HookAction) -> String {
        switch action.kind {
        case .mute(_, let user, let seconds, let reason):
            " (\(user)\(seconds.map { ", \($0) s" } ?? "")\(reason.map { ": \($0)" } ?? ""))"
        case .kick(_, let user, let reason): " (\(user)\(reason.map { ": \($0)" } ?? ""))"
        case .warn(_, let user, let reason): " (\(user)\(reason.map { ": \($0)" } ?? ""))"
        case .block(_, let user, _), .add(_, let user): " (\(user))"
        case .sendCommand(_, let command): " (\(command.action))"
        default: ""
        }
    }

    private func oldDescribe(_ value: Any, hook: HookName) -> String? {
        switch hook {
        case .beforeSend:
            let reason = value as? String
            return reason.map { $0.isEmpty ? "drop" : "drop: \($0)" } ?? "drop"
        case .translate:
            return (value as? String).map { "translated: \($0)" }
        default:
            guard let verdict = value as? ModerationVerdict else { return nil }
            switch verdict {
            case .allow: return "allow"
            case .replace(let text): return "replace with \"\(text)\""
            case .block(let reason, let code, let silent):
                var said = "block"
                if let reason { said += ": \(reason)" }
                if let code { said += " (appCode \(code))" }
                if silent { said += " (silent)" }
                return said
            }
        }
    }

    private func oldHook(_ outcome: String?, _ actions: [HookAction], _ error: HookError?) -> String {
        var parts: [String] = []
        if let outcome { parts.append(outcome) }
        if !actions.isEmpty { parts.append("asked for " + actions.map { MessageTrace.name(of: $0.kind) }.joined(separator: ", ")) }
        if let error { parts.append("failed: \(error.message)") }
        return parts.isEmpty ? "no verdict" : parts.joined(separator: "; ")
    }
}

extension Mirror {
    /// Every string held in `value`, however deeply (enum payloads, optionals, tuples).
    fileprivate static func strings(in value: Any) -> [String] {
        if let string = value as? String { return [string] }
        return Mirror(reflecting: value).children.flatMap { strings(in: $0.value) }
    }
}
