import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMClient

/// Pure logic: query JSON, registry, backoff, content encoding.
final class UnitTests: XCTestCase {
    func testQueryJSON() {
        let query = IMConversationQuery()
            .whereKey("name", equalTo: "Tom")
            .whereKey(IMConversationQuery.attr("age"), greaterThan: 3)
            .whereKey(IMConversationQuery.attr("age"), lessThanOrEqualTo: 9)
            .whereKey("m", containsAll: ["Tom", "Jerry"])
            .whereKey("c", containedIn: ["Tom"])
            .whereKeyExists("attr.x", false)
            .whereKey("name", matchesRegex: "^t", options: "i")
            .sort(by: "lm", descending: true).sort(by: "name")
            .limit(5).skip(10)
        XCTAssertEqual(
            query.whereJSON,
            [
                "name": ["$regex": "^t", "$options": "i"],
                "attr.age": ["$gt": 3, "$lte": 9],
                "m": ["$all": ["Tom", "Jerry"]],
                "c": ["$in": ["Tom"]],
                "attr.x": ["$exists": false],
            ])
        XCTAssertEqual(query.sortString, "-lm,name")
        let command = query.command()
        XCTAssertEqual(command.limit, 5)
        XCTAssertEqual(command.skip, 10)
        XCTAssertEqual(command.op, .query)
        let or = IMConversationQuery.or([
            IMConversationQuery().whereKey("a", notEqualTo: 1), IMConversationQuery().whereKey("b", equalTo: 2),
        ])
        XCTAssertEqual(or.whereJSON, ["$or": [["a": ["$ne": 1]], ["b": 2]]])
        XCTAssertEqual(IMConversationQuery().whereKey("name", containsString: "a.b").whereJSON, ["name": ["$regex": "a\\.b"]])
    }

    func testRegistryDecodesRegisteredTypesOnly() throws {
        let registry = IMMessageRegistry()
        let body = TypedMessage(type: 7, text: "hi", fields: ["strength": 2, "note": "n"]).encoded()
        guard case .typed(let generic) = IMMessageContent.decode(body, registry: registry) else { return XCTFail() }
        XCTAssertEqual(generic.fields["strength"], 2)
        try registry.register(Poke.self)
        XCTAssertEqual(IMMessageContent.decode(body, registry: registry).as(Poke.self), Poke(strength: 2, note: "n"))
        let broken = TypedMessage(type: 7, fields: ["strength": "not a number"]).encoded()
        guard case .typed = IMMessageContent.decode(broken, registry: registry) else {
            return XCTFail("undecodable custom message was not kept generic")
        }
        XCTAssertThrowsError(try registry.register(Negative.self))
        registry.unregister(7)
        XCTAssertNil(registry.registeredType(for: 7))
        guard case .common("plain") = IMMessageContent.decode("plain", registry: registry) else { return XCTFail() }
        let encoded = try XCTUnwrap(IMMessageContent.custom(Poke(strength: 1, note: "x")).typedMessage)
        XCTAssertEqual(encoded.type, 7)
        XCTAssertEqual(encoded.fields["note"], "x")
    }

    func testBackoffGrowsWithJitterAndCap() {
        var options = IMClientOptions(port: 1)
        options.reconnectBaseDelay = .milliseconds(100)
        options.reconnectMaxDelay = .seconds(1)
        XCTAssertEqual(options.reconnectDelay(attempt: 0, unit: 1), .milliseconds(100))
        XCTAssertEqual(options.reconnectDelay(attempt: 0, unit: 0), .milliseconds(50))
        XCTAssertEqual(options.reconnectDelay(attempt: 3, unit: 1), .milliseconds(800))
        XCTAssertEqual(options.reconnectDelay(attempt: 10, unit: 1), .seconds(1))
        XCTAssertEqual(options.reconnectDelay(attempt: 1000, unit: 0.5), .milliseconds(750))
    }

    /// Request deadlines: the sweeper sleeps until the earliest one instead of checking every 20 ms, and a deadline
    /// earlier than the one it sleeps for (armed later) wakes it in time; a later one is left pending.
    func testTheSweeperWakesAtTheEarliestDeadlineOnly() async {
        let client = IMClient(clientId: "Tom", options: IMClientOptions(url: "ws://127.0.0.1:1"))
        let late = await client.pendingRequest(1, failingAfter: .seconds(60), with: IMError(.requestTimeout, "一分钟 ⏳"))
        let early = await client.pendingRequest(2, failingAfter: .milliseconds(200), with: IMError(.requestTimeout, "快 🐇"))
        let next = await client.pendingRequest(3, failingAfter: .milliseconds(400), with: IMError(.requestTimeout, "慢 🐢"))
        guard case .failure(let first) = await early.value(), case .failure(let second) = await next.value() else {
            return XCTFail("a request without a reply was answered")
        }
        XCTAssertEqual([first.detail, second.detail], ["快 🐇", "慢 🐢"])
        let (left, sweeps) = await client.sweepState
        XCTAssertEqual(left, [1], "the request due in a minute is still pending")
        XCTAssertLessThanOrEqual(sweeps, 3, "one check per deadline (at most one more if a sleep ends early), not every 20 ms")
        _ = late
    }
}

private struct Negative: IMCustomMessage, Codable {
    static let messageType = -9
}

extension IMClient {
    /// A written request with no reply yet, failing with `error` after `delay` unless one comes.
    fileprivate func pendingRequest(_ serial: Int, failingAfter delay: Duration, with error: IMError) -> ReplySlot {
        let slot = ReplySlot()
        pending[serial] = PendingRequest(command: Command(cmd: .direct, i: serial), policy: .fail, slot: slot)
        arm(serial, after: delay, error)
        return slot
    }

    fileprivate var sweepState: (pending: [Int], sweeps: Int) { (pending.keys.sorted(), sweeps) }
}
