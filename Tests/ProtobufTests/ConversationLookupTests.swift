import Foundation
import HookbotTestSupport
import IMCore
import IMProto
import XCTest

/// The two SDK regressions of issue 25: a conversation looked up by id by a client that may join it but is
/// not (or no longer) a member, and LeanCloud's `attr` object kept apart from top-level custom fields.
final class ConversationLookupTests: XCTestCase {
    /// `getConversation(id, true)` and `getConversations(ids)` as the JS SDK sends them; the raw results.
    private func sdkLookup(_ client: WireClient, where condition: String, limit: Int32? = nil) async throws -> [[String: JSONValue]] {
        var query = LCProtoGenericCommand.conv(.query)
        query.convMessage.where.data = condition
        query.convMessage.sort = "-lm"
        if let limit { query.convMessage.limit = limit }
        let reply = try await client.request(query)
        XCTAssertEqual(reply.op, .results, "\(reply)")
        let raw = try ProtobufCommandCodec.generic(from: reply).convMessage.results.data
        return try XCTUnwrap(JSONValue.parse(raw)?.arrayValue).compactMap(\.objectValue)
    }

    func testAKickedMemberLooksTheGroupUpByIDAndRejoins() async throws {
        let server = try await startServer()
        let tom = try await WireClient.login("Tom", port: server.port, mode: .binary)
        let spike = try await WireClient.login("Spike", port: server.port, mode: .base64)
        let eve = try await WireClient.login("Eve", port: server.port, mode: .json)
        let group = try await tom.sdkStart(members: ["Jerry", "Spike", "Tom"], attributes: #"{"name":"Cats"}"#)
        let secret = try await tom.sdkStart(members: ["Jerry", "Spike", "Tom"], attributes: #"{"name":"Plans","joinPolicy":"invite"}"#)
        let pair = try await tom.sdkStart(members: ["Jerry", "Tom"], attributes: "{}", unique: true)

        let kick = LCProtoGenericCommand.conv(.remove, cid: group, members: ["Spike"])
        let kicked = try await tom.request(kick)
        XCTAssertEqual(kicked.allowedPids, ["Spike"])

        // getConversation(id, true): the group answers, as an outsider sees it (no members, no mutes).
        let found = try await sdkLookup(spike, where: #"{"objectId":"\#(group)"}"#)
        XCTAssertEqual(found.count, 1)
        XCTAssertEqual(found.first?["objectId"], .string(group))
        XCTAssertEqual(found.first?["name"], .string("Cats"))
        XCTAssertEqual(found.first?["c"], .string("Tom"))
        XCTAssertNil(found.first?["m"])
        XCTAssertNil(found.first?["mu"])
        // getConversations([...]) with $in: the joinable group answers, the invite-only ones do not.
        let several = try await sdkLookup(spike, where: #"{"objectId":{"$in":["\#(group)","\#(secret)","\#(pair)","nope"]}}"#, limit: 999)
        XCTAssertEqual(Set(several.compactMap { $0["objectId"]?.stringValue }), [group, secret])
        XCTAssertNil(several.first { $0["objectId"] == .string(group) }?["m"])
        // Spike is still a member of the invite-only one and sees its members.
        XCTAssertEqual(several.first { $0["objectId"] == .string(secret) }?["m"]?.arrayValue?.count, 3)
        // A stranger: the group yes, the invite-only conversation and the 1:1 not.
        var lookup = Command(cmd: .conv, op: .query)
        lookup.where = .object(["objectId": .object(["$in": .array([group, secret, pair].map(JSONValue.string))])])
        let strangerSees = try await eve.request(lookup).results ?? []
        XCTAssertEqual(strangerSees.map(\.objectId), [group])
        XCTAssertNil(strangerSees.first?.m)
        // A listing query keeps its privacy rules: the group does not show up for a non-member.
        var listing = Command(cmd: .conv, op: .query)
        listing.where = .object(["name": .string("Cats")])
        let listed = try await eve.request(listing).results ?? []
        XCTAssertEqual(listed.count, 0)
        var both = Command(cmd: .conv, op: .query)
        both.where = .object(["objectId": .string(group), "name": .string("Cats")])
        let combined = try await eve.request(both).results ?? []
        XCTAssertEqual(combined.count, 0, "only a pure id lookup reaches conversations one is not in")

        // join() is an add of oneself: Spike is back, and its lookup shows the members again.
        let join = LCProtoGenericCommand.conv(.add, cid: group, members: ["Spike"])
        let rejoined = try await spike.request(join)
        XCTAssertEqual(rejoined.allowedPids, ["Spike"])
        let again = try await sdkLookup(spike, where: #"{"objectId":"\#(group)"}"#)
        XCTAssertEqual(Set(again.first?["m"]?.arrayValue?.compactMap(\.stringValue) ?? []), ["Jerry", "Spike", "Tom"])
        for client in [tom, spike, eve] { await client.close() }
    }

    func testAttrPathsAndTopLevelFieldsStayWhereTheyWereWritten() async throws {
        let server = try await startServer()
        let tom = try await WireClient.login("Tom", port: server.port, mode: .binary)
        let jerry = try await WireClient.login("Jerry", port: server.port, mode: .base64)
        let json = try await WireClient.login("Spike", port: server.port, mode: .json)
        // createConversation({ members, name, topic, attr: { mood } }).
        let cid = try await tom.sdkStart(
            members: ["Jerry", "Spike", "Tom"], attributes: #"{"name":"Cats","topic":"whiskers","attr":{"mood":"calm"}}"#)
        func sdkFields(_ client: WireClient) async throws -> [String: JSONValue] {
            let found = try await sdkLookup(client, where: #"{"objectId":"\#(cid)"}"#)
            return try XCTUnwrap(found.first)
        }
        var fields = try await sdkFields(jerry)
        XCTAssertEqual(fields["topic"], .string("whiskers"))
        XCTAssertEqual(fields["attr"], .object(["mood": .string("calm")]))

        // conversation.set('attr.topic', 'cheese').save(): inside attr, and topic is untouched.
        var update = LCProtoGenericCommand.conv(.update, cid: cid)
        update.convMessage.attr.data = #"{"attr.topic":"cheese"}"#
        let updated = try await tom.request(update)
        XCTAssertEqual(updated.op, .updated)
        // The other SDK member's CONVERSATION_INFO_UPDATED carries attr.topic as written.
        let sdkEvent = try await jerry.next { $0.cmd == .conv && $0.op == .updated }
        let raw = try ProtobufCommandCodec.generic(from: sdkEvent).convMessage
        XCTAssertEqual(JSONValue.parse(raw.attr.data), .object(["attr.topic": .string("cheese")]))
        XCTAssertEqual(JSONValue.parse(raw.attrModified.data), .object(["attr.topic": .string("cheese")]))
        // A JSON client sees it as the attribute attr's topic.
        let jsonEvent = try await json.next { $0.cmd == .conv && $0.op == .updated }
        XCTAssertEqual(jsonEvent.attr, .object(["attr.attr.topic": .string("cheese")]))
        fields = try await sdkFields(jerry)
        XCTAssertEqual(fields["topic"], .string("whiskers"))
        XCTAssertEqual(fields["attr"], .object(["mood": .string("calm"), "topic": .string("cheese")]))

        // conversation.set('topic', 'tails'): the top-level field, attr.topic untouched.
        update.convMessage.attr.data = #"{"topic":"tails"}"#
        _ = try await tom.request(update)
        let tails = try await jerry.next { $0.cmd == .conv && $0.op == .updated }
        let tailsRaw = try ProtobufCommandCodec.generic(from: tails).convMessage
        XCTAssertEqual(JSONValue.parse(tailsRaw.attrModified.data), .object(["topic": .string("tails")]))
        fields = try await sdkFields(jerry)
        XCTAssertEqual(fields["topic"], .string("tails"))
        XCTAssertEqual(fields["attr"], .object(["mood": .string("calm"), "topic": .string("cheese")]))
        var query = Command(cmd: .conv, op: .query)
        query.where = .object(["objectId": .string(cid)])
        let seen = try await json.request(query).results?.first
        XCTAssertEqual(
            seen?.attr,
            .object(["topic": .string("tails"), "attr": .object(["mood": .string("calm"), "topic": .string("cheese")])]))

        // equalTo('attr.topic', 'cheese') finds it, equalTo('topic', 'cheese') does not; and the reverse.
        let byAttr = try await sdkLookup(jerry, where: #"{"attr.topic":"cheese","m":"Jerry"}"#)
        XCTAssertEqual(byAttr.compactMap { $0["objectId"]?.stringValue }, [cid])
        let byTopic = try await sdkLookup(jerry, where: #"{"topic":"cheese","m":"Jerry"}"#)
        XCTAssertEqual(byTopic.count, 0)
        let byTails = try await sdkLookup(jerry, where: #"{"topic":"tails","m":"Jerry"}"#)
        XCTAssertEqual(byTails.compactMap { $0["objectId"]?.stringValue }, [cid])
        // A JSON client's attr.attr.topic is the SDK's attr.topic.
        var jsonUpdate = Command.conv(.update, cid)
        jsonUpdate.attr = .object(["attr.attr.topic": .string("brie")])
        _ = try await json.request(jsonUpdate)
        let fromJSON = try await jerry.next { $0.cmd == .conv && $0.op == .updated }
        let fromJSONRaw = try ProtobufCommandCodec.generic(from: fromJSON).convMessage
        XCTAssertEqual(JSONValue.parse(fromJSONRaw.attrModified.data), .object(["attr.topic": .string("brie")]))
        fields = try await sdkFields(tom)
        XCTAssertEqual(fields["attr"]?.objectValue?["topic"], .string("brie"))
        XCTAssertEqual(fields["topic"], .string("tails"))
        for client in [tom, jerry, json] { await client.close() }
    }
}
