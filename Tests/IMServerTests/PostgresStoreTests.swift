import Foundation
import IMCore
import Logging
import XCTest

@testable import IMServer

/// Exercises `PostgresStore` against a real PostgreSQL (`scripts/with-postgres.sh swift test --filter
/// PostgresStoreTests`); skipped without HOOKBOT_TEST_POSTGRES_URL.
final class PostgresStoreTests: XCTestCase {
    private static var logger: Logger {
        var logger = Logger(label: "postgres-smoke")
        logger.logLevel = .warning
        return logger
    }

    private func openStore(schema: String? = nil) async throws -> (PostgresStore, String) {
        guard let base = ProcessInfo.processInfo.environment["HOOKBOT_TEST_POSTGRES_URL"] else {
            throw XCTSkip("HOOKBOT_TEST_POSTGRES_URL is not set (run under scripts/with-postgres.sh)")
        }
        let schema = schema ?? "t_" + Identifiers.random(length: 10).lowercased()
        let store = try PostgresStore(url: base + "?schema=" + schema, logger: Self.logger)
        try await store.migrate()
        try await store.migrate()
        return (store, schema)
    }

    private static func message(_ cid: String, from: String, _ data: String, token: String? = nil, recipients: [String]? = nil)
        -> OutgoingMessage
    {
        let transport = Transport(
            remoteAddress: "test", format: .local, encoder: { .command($0) }, emit: { _ in }, finish: {}, allocateID: { 1 })
        var message = OutgoingMessage(
            cid: cid, from: from, data: data, receipt: true, priority: nil, dedupeToken: token, mentionPids: nil, mentionAll: nil,
            sender: Connection(id: 1, transport: transport), serial: nil)
        message.recipients = recipients
        return message
    }

    private static func commit(_ store: PostgresStore, _ messages: [OutgoingMessage], moves: [CursorKey: CursorMove] = [:]) async throws
        -> BatchResult
    {
        guard case .suspending(let write) = store.batchWriter else {
            XCTFail("expected a suspending writer")
            return BatchResult(outcomes: [], timestamps: [:])
        }
        return try await write(
            MessageBatch(
                messages: messages, moves: moves, knownTimestamps: [:], now: Identifiers.nowMillis(), roomMembers: { _ in ["Tom"] }))
    }

    private func query(_ store: PostgresStore, _ condition: String, sort: String? = nil, viewer: String = "Tom") async throws
        -> [ConversationInfo]
    {
        let compiled = try ConversationQuery.compile(JSONValue.parse(condition), dialect: store.queryDialect)
        return try await store.queryConversations(compiled, sort: sort, viewer: viewer, limit: 50, skip: 0, scanLimit: 10_000)
    }

    func testURLParsing() throws {
        let url = try PostgresURL("postgresql://us%40er:p%3Ass@db.example:6543/my%20db?schema=Hook_1&sslmode=disable")
        XCTAssertEqual(url.username, "us@er")
        XCTAssertEqual(url.password, "p:ss")
        XCTAssertEqual(url.host, "db.example")
        XCTAssertEqual(url.port, 6543)
        XCTAssertEqual(url.database, "my db")
        XCTAssertEqual(url.schema, "hook_1")
        XCTAssertEqual(url.channel, "hookbot_hook_1")
        let plain = try PostgresURL("postgres://u@h/d")
        XCTAssertEqual(plain.port, 5432)
        XCTAssertEqual(plain.schema, "public")
        XCTAssertNil(plain.password)
        for bad in [
            "mysql://u@h/d", "postgres://h/d", "postgres://u@h/d?sslmode=require", "postgres://u@h/d?schema=1abc",
            "postgres://u@h/d?schema=a-b", "postgres://u@h/d?foo=1", "postgres://u@h/d?schema=" + String(repeating: "a", count: 56),
        ] {
            XCTAssertThrowsError(try PostgresURL(bad), bad) { error in
                XCTAssertTrue("\(error)".hasPrefix("invalid PostgreSQL URL: "), "\(error)")
            }
        }
        XCTAssertEqual(PostgresStore.numberPlaceholders("a = ? AND b IN (?, ?::jsonb)").sql, "a = $1 AND b IN ($2, $3::jsonb)")
    }

    func testStoreSemantics() async throws {
        let (store, _) = try await openStore()
        try await store.ping()
        let now = Identifiers.nowMillis()

        // Conversations: normal, unique twice, temporary, chat room.
        let (group, created) = try await store.createConversation(
            NewConversation(
                creator: "Tom", members: ["Jerry", "Spike"], name: "cats", attr: .object(["topic": "Cartoons"]), unique: false,
                transient: false, temporaryTTL: nil, now: now))
        XCTAssertTrue(created)
        let groupMembers = try await store.members(of: group.id)
        XCTAssertEqual(groupMembers, ["Jerry", "Spike", "Tom"])
        let unique1 = try await store.createConversation(
            NewConversation(creator: "Tom", members: ["Jerry"], unique: true, transient: false, temporaryTTL: nil, now: now))
        let unique2 = try await store.createConversation(
            NewConversation(creator: "Jerry", members: ["Tom"], unique: true, transient: false, temporaryTTL: nil, now: now))
        XCTAssertTrue(unique1.created)
        XCTAssertFalse(unique2.created)
        XCTAssertEqual(unique1.record.id, unique2.record.id)
        let temporary = try await store.createConversation(
            NewConversation(creator: "Tom", members: ["Jerry"], unique: false, transient: false, temporaryTTL: 60, now: now))
        XCTAssertTrue(temporary.record.id.hasPrefix("_tmp:"))
        let temporaries = try await store.temporaryConversations([temporary.record.id, group.id], viewer: "Jerry")
        XCTAssertEqual(temporaries.map(\.objectId), [temporary.record.id])
        let notSpikes = try await store.temporaryConversations([temporary.record.id], viewer: "Spike")
        XCTAssertEqual(notSpikes.count, 0)
        let room = try await store.createConversation(
            NewConversation(creator: "Tom", members: [], name: "x", unique: false, transient: true, temporaryTTL: nil, now: now))
        let roomCount = try await store.memberCount(of: room.record.id)
        XCTAssertEqual(roomCount, 0)
        let missing = try await store.conversation("nope")
        XCTAssertNil(missing)
        let fetched = try await store.conversation(group.id)
        XCTAssertEqual(fetched?.attr, .object(["topic": "Cartoons"]))

        // Members.
        let added = try await store.changeMembers(
            MembershipRequest(kind: .add, cid: group.id, actor: "Tom", clientIDs: ["Tyke", "Jerry", "Tyke"], now: now + 1))
        XCTAssertEqual(added.changed, ["Tyke"])
        XCTAssertEqual(added.members.sorted(), ["Jerry", "Spike", "Tom", "Tyke"])
        do {
            _ = try await store.changeMembers(
                MembershipRequest(kind: .add, cid: group.id, actor: "Nibbles", clientIDs: ["Butch"], now: now))
            XCTFail("an outsider added a member")
        } catch let error as IMError {
            XCTAssertEqual(error, IMError(.conversationMembershipRequired, "only members may add others to \(group.id)"))
        }
        let removed = try await store.changeMembers(
            MembershipRequest(kind: .remove, cid: group.id, actor: "Tom", clientIDs: ["Tyke", "Nobody"], now: now + 2))
        XCTAssertEqual(removed.changed, ["Tyke"])
        let tykeIsMember = try await store.isMember("Tyke", of: group.id)
        XCTAssertFalse(tykeIsMember)
        let jerrys = try await store.memberships(of: "Jerry")
        XCTAssertEqual(jerrys.map(\.cid).sorted(), [group.id, temporary.record.id, unique1.record.id].sorted())
        try await store.setMuted(cid: group.id, clientID: "Jerry", muted: true)
        let muted = try await store.conversation(group.id)
        XCTAssertEqual(muted?.muted, ["Jerry"])
        let notified = try await store.updateConversation(
            cid: group.id, by: "Tom", inRoom: false, patch: ["attr.topic": "cartoons", "name": "cats!"], now: now + 3)
        XCTAssertEqual(notified.sorted(), ["Jerry", "Spike", "Tom"])
        do {
            _ = try await store.updateConversation(cid: group.id, by: "Butch", inRoom: false, patch: ["name": "x"], now: now)
            XCTFail("an outsider updated")
        } catch let error as IMError { XCTAssertEqual(error.code, IMErrorCode.conversationUpdateRejected.rawValue) }

        // A batch: timestamps strictly increasing, dedupe tokens, failures.
        let batch = try await Self.commit(
            store,
            [
                Self.message(group.id, from: "Jerry", "one", token: "tok1"),
                Self.message(group.id, from: "Tom", "two"),
                Self.message(group.id, from: "Jerry", "dup", token: "tok1"),
                Self.message("missing", from: "Tom", "x"),
                Self.message(group.id, from: "Butch", "x"),
                Self.message(group.id, from: "Tom", "secret", recipients: ["Spike"]),
                Self.message(room.record.id, from: "Tom", "room"),
            ])
        var stored: [MessageRecord] = []
        for (index, outcome) in batch.outcomes.enumerated() {
            switch (index, outcome) {
            case (0, .stored(let record, let members, let room)), (1, .stored(let record, let members, let room)),
                (5, .stored(let record, let members, let room)):
                XCTAssertFalse(room)
                XCTAssertEqual(members, index == 5 ? ["Spike"] : ["Jerry", "Spike", "Tom"])
                stored.append(record)
            case (2, .duplicate(let record)): XCTAssertEqual(record.data, "one")
            case (3, .failed(let error)): XCTAssertEqual(error, IMError(.invalidMessagingTarget, "conversation missing does not exist"))
            case (4, .failed(let error)): XCTAssertEqual(error, IMError(.invalidMessagingTarget, "Butch is not a member of \(group.id)"))
            case (6, .stored(let record, let members, let room)):
                XCTAssertTrue(room)
                XCTAssertEqual(members, ["Tom"])
                XCTAssertFalse(record.receipt)
            default: XCTFail("unexpected outcome \(index): \(outcome)")
            }
        }
        XCTAssertEqual(stored.count, 3)
        XCTAssertTrue(zip(stored, stored.dropFirst()).allSatisfy { $0.t < $1.t })
        XCTAssertEqual(batch.timestamps[group.id], stored.last?.t)
        // A second batch continues above the first one's timestamps even with `now` in the past; the dedupe
        // token is found in the database.
        guard case .suspending(let write) = store.batchWriter else { return XCTFail() }
        let later = try await write(
            MessageBatch(
                messages: [Self.message(group.id, from: "Spike", "three"), Self.message(group.id, from: "Jerry", "again", token: "tok1")],
                moves: [CursorKey(cid: group.id, clientID: "Spike"): CursorMove(ids: [stored[0].id])], knownTimestamps: [:],
                now: 1, roomMembers: { _ in [] }))
        guard case .stored(let three, _, _) = later.outcomes[0], case .duplicate(let again) = later.outcomes[1] else {
            return XCTFail("\(later.outcomes)")
        }
        XCTAssertEqual(three.t, stored[2].t + 1)
        XCTAssertEqual(again.id, stored[0].id)
        let touched = try await store.conversation(group.id)
        XCTAssertEqual(touched?.lm, three.t)
        let spikes = try await store.memberships(of: "Spike")
        XCTAssertEqual(spikes.first { $0.cid == group.id }?.deliveredT, stored[0].t)

        // History, backlog, unread, read marks, receipts.
        let jerryHistory = try await store.history(cid: group.id, limit: 10, beforeT: nil, afterT: nil, viewer: "Jerry", oldestFirst: false)
        XCTAssertEqual(jerryHistory.map(\.data), ["one", "two", "three"])
        let spikeHistory = try await store.history(cid: group.id, limit: 2, beforeT: nil, afterT: nil, viewer: "Spike", oldestFirst: false)
        XCTAssertEqual(spikeHistory.map(\.data), ["secret", "three"])
        let oldest = try await store.history(cid: group.id, limit: 2, beforeT: nil, afterT: nil, viewer: "", oldestFirst: true)
        XCTAssertEqual(oldest.map(\.data), ["one", "two"])
        let two = try await store.message(stored[1].id)
        XCTAssertEqual(two?.data, "two")
        let backlog = try await store.backlog(clientID: "Jerry", limit: 1)
        XCTAssertEqual(backlog.count, 3)
        let groupBacklog = backlog.first { $0.records.first?.cid == group.id }
        XCTAssertEqual(groupBacklog?.records.map(\.data), ["two"])
        XCTAssertEqual(groupBacklog?.hasMore, true)
        XCTAssertEqual(backlog.filter { $0.records.isEmpty }.count, 2)
        let unread = try await store.unreadCounts(clientID: "Jerry")
        XCTAssertEqual(unread.count, 1)
        XCTAssertEqual(unread.first?.unread, 2)
        XCTAssertEqual(unread.first?.mid, three.id)
        XCTAssertNil(unread.first?.mentioned)
        let (readT, receipts) = try await store.markRead(cid: group.id, clientID: "Jerry", messageID: nil, t: nil)
        XCTAssertEqual(readT, three.t)
        XCTAssertEqual(Set(receipts.map(\.id)), [stored[2].id, three.id])
        let unreadAfter = try await store.unreadCounts(clientID: "Jerry")
        XCTAssertEqual(unreadAfter.count, 0)
        let marks = try await store.receiptTimestamps(cid: group.id, clientID: "Tom")
        XCTAssertEqual(marks.readT, three.t)
        let ids = try await store.receiptMessageIDs(cid: group.id, from: 0, to: .max, excluding: "Tom")
        XCTAssertEqual(ids, [stored[0].id, three.id])
        do {
            _ = try await store.markRead(cid: group.id, clientID: "Butch", messageID: nil, t: nil)
            XCTFail("a non-member marked read")
        } catch let error as IMError { XCTAssertEqual(error, IMError(.invalidMessagingTarget, "Butch is not a member of \(group.id)")) }

        // Recall.
        let recalled = try await store.recall(
            cid: group.id, messageID: stored[1].id, by: "Tom", now: Identifiers.nowMillis(), window: 60_000)
        XCTAssertTrue(recalled.record.recalled)
        let recalledTwo = try await store.message(stored[1].id)
        XCTAssertEqual(recalledTwo?.data, MessageRecord.recalledPlaceholder)
        do {
            _ = try await store.recall(cid: group.id, messageID: stored[0].id, by: "Tom", now: Identifiers.nowMillis(), window: 60_000)
            XCTFail("recalled someone else's message")
        } catch let error as IMError { XCTAssertEqual(error.code, IMErrorCode.messageOwnershipRequired.rawValue) }

        // Tags, tokens, nonces.
        var generations: [Int64?] = []
        for (device, forced) in [("a", false), ("b", false), ("a", false), ("b", true)] {
            generations.append(try await store.claimTag(clientID: "Tom", tag: "mobile", deviceID: device, forced: forced))
        }
        XCTAssertEqual(generations, [1, nil, 2, 3])
        try await store.issueToken("token1", clientID: "Tom", expiresAt: now + 10_000, now: now)
        let owner = try await store.clientID(forToken: "token1", now: now)
        XCTAssertEqual(owner, "Tom")
        try await store.revokeToken("token1")
        let revoked = try await store.clientID(forToken: "token1", now: now)
        XCTAssertNil(revoked)
        var replays: [Bool] = []
        for (at, purge) in [(now, true), (now + 500, false), (now + 2000, true)] {
            replays.append(try await store.useNonce(scope: "login", nonce: "n1", now: at, window: 1000, purge: purge))
        }
        XCTAssertEqual(replays, [false, true, false])

        // Queries.
        let toms = try await query(store, #"{"m":"Tom"}"#)
        XCTAssertEqual(Set(toms.map(\.objectId)), [group.id, unique1.record.id])
        let regex = try await query(store, #"{"attr.topic":{"$regex":"^ca","$options":"i"}}"#)
        XCTAssertEqual(regex.map(\.objectId), [group.id])
        XCTAssertEqual(regex.first?.m?.sorted(), ["Jerry", "Spike", "Tom"])
        XCTAssertEqual(regex.first?.mu, ["Jerry"])
        let active = try await query(store, #"{"lm":{"$gt":0}}"#, sort: "-lm")
        XCTAssertEqual(active.map(\.objectId), [group.id, room.record.id])
        let stored2 = try await query(store, #"{"tr":false}"#)
        XCTAssertEqual(Set(stored2.map(\.objectId)), [group.id, unique1.record.id])
        let named = try await query(store, #"{"name":"x"}"#)
        XCTAssertEqual(named.map(\.objectId), [room.record.id])
        XCTAssertNil(named.first?.m)
        let outsider = try await query(store, #"{"objectId":"\#(group.id)"}"#, viewer: "Butch")
        XCTAssertEqual(outsider.count, 0)
        // Every operator compiles to SQL PostgreSQL accepts with these bindings.
        let conditions = [
            #"{"m":{"$all":["Tom","Jerry"]}}"#, #"{"m":{"$in":["Spike"]}}"#, #"{"m":{"$nin":["Butch"]},"tr":false}"#,
            #"{"m":{"$exists":true},"lm":{"$gte":1}}"#, #"{"m":{"$ne":"Butch"},"objectId":{"$in":["a","b"]}}"#,
            #"{"attr.topic":"cartoons"}"#, #"{"attr.n":{"$gt":1,"$lte":5.5}}"#, #"{"attr.topic":{"$in":["cartoons",1,null,true]}}"#,
            #"{"attr.topic":{"$nin":["x"]},"objectId":"x"}"#, #"{"attr.topic":{"$exists":false},"lm":{"$lt":1}}"#,
            #"{"createdAt":{"$gt":{"__type":"Date","iso":"2020-01-01T00:00:00Z"}},"m":"Tom"}"#, #"{"name":{"$ne":null},"m":"Tom"}"#,
            #"{"$or":[{"m":"Tom"},{"objectId":"x"}]}"#, #"{"$and":[{"m":"Tom"},{"tr":{"$ne":true}}]}"#,
            #"{"c":{"$regex":"^t","$options":"imx"},"m":"Tom"}"#, #"{"updatedAt":{"$in":[1,2]},"m":"Tom"}"#,
        ]
        for condition in conditions {
            do { _ = try await query(store, condition, sort: "name,-createdAt,attr.topic") } catch { XCTFail("\(condition): \(error)") }
        }
        let both = try await query(store, #"{"m":{"$all":["Tom","Spike"]},"attr.topic":"cartoons"}"#)
        XCTAssertEqual(both.map(\.objectId), [group.id])
        let scanned = try ConversationQuery.compile(JSONValue.parse(#"{"name":"x"}"#), dialect: .postgres)
        do {
            _ = try await store.queryConversations(scanned, sort: nil, viewer: "Tom", limit: 10, skip: 0, scanLimit: 1)
            XCTFail("scanned over the limit")
        } catch let error as IMError { XCTAssertEqual(error.code, IMErrorCode.conversationQueryFailed.rawValue) }
        // An expired temporary conversation is gone, and purged by the next temporary start.
        let expired = try await store.createConversation(
            NewConversation(creator: "Tom", members: ["Jerry"], unique: false, transient: false, temporaryTTL: 1, now: now - 5000))
        let expiredNow = try await store.conversation(expired.record.id)
        XCTAssertNil(expiredNow)
        _ = try await store.createConversation(
            NewConversation(creator: "Tom", members: ["Jerry"], unique: false, transient: false, temporaryTTL: 60, now: now))
        let expiredMembers = try await store.members(of: expired.record.id)
        XCTAssertEqual(expiredMembers, [])
        do {
            _ = try await query(store, #"{"lm":{"$gt":"x"}}"#)
            XCTFail("a string compared with lm")
        } catch let error as IMError { XCTAssertEqual(error.code, IMErrorCode.invalidField.rawValue) }
        do {
            _ = try await query(store, #"{"attr.topic":{"$regex":"\\p{L}"}}"#)
            XCTFail("PostgreSQL ran \\p{L}")
        } catch let error as IMError { XCTAssertEqual(error, IMError(.invalidField, "where: $regex is not a valid regular expression")) }
        await store.shutdown()
    }

    /// Two stores on one schema act as two nodes: concurrent batches on one conversation get distinct,
    /// increasing timestamps; concurrent unique starts resolve to one conversation; messages are announced.
    func testTwoNodes() async throws {
        let (first, schema) = try await openStore()
        let (second, _) = try await openStore(schema: schema)
        let now = Identifiers.nowMillis()
        let group = try await first.createConversation(
            NewConversation(creator: "Tom", members: ["Jerry"], unique: false, transient: false, temporaryTTL: nil, now: now)
        ).record

        let listener = try await first.makeListenConnection(logger: Self.logger)
        let heard = try await listener.listen(on: first.channel) { notifications in
            try await withThrowingTaskGroup(of: [Int64].self) { tasks in
                for store in [first, second] {
                    tasks.addTask {
                        var times: [Int64] = []
                        for round in 0..<20 {
                            let result = try await Self.commit(store, [Self.message(group.id, from: "Tom", "\(round)")])
                            if case .stored(let record, _, _) = result.outcomes[0] { times.append(record.t) }
                        }
                        return times
                    }
                }
                var all: [Int64] = []
                for try await times in tasks {
                    XCTAssertEqual(times, times.sorted())
                    all += times
                }
                XCTAssertEqual(Set(all).count, 40)
                var announced = 0
                for try await notification in notifications {
                    XCTAssertEqual(Announcement(payload: notification.payload).map { if case .message = $0 { true } else { false } }, true)
                    announced += 1
                    if announced == 40 { break }
                }
                return announced
            }
        }
        XCTAssertEqual(heard, 40)
        try await listener.close()

        let starts = try await withThrowingTaskGroup(of: String.self) { tasks in
            for index in 0..<8 {
                let store = index % 2 == 0 ? first : second
                tasks.addTask {
                    try await store.createConversation(
                        NewConversation(creator: "A", members: ["B", "C"], unique: true, transient: false, temporaryTTL: nil, now: now)
                    ).record.id
                }
            }
            var ids: Set<String> = []
            for try await id in tasks { ids.insert(id) }
            return ids
        }
        XCTAssertEqual(starts.count, 1)
        await first.shutdown()
        await second.shutdown()
    }
}
