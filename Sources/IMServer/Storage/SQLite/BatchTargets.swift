import Foundation
import GRDB
import IMCore
import Synchronization

/// What a message batch reads of the conversations it stores into (whether each is a chat room, when it
/// expires, its members in `ConversationTable.members` order), kept from one batch to the next: for a message
/// to a conversation that a previous batch wrote to, the batch reads neither its row nor its member list
/// again (two statements of a one-message batch's six; 11 % of the writer thread's time, issue 30 round 6).
///
/// SQLite only: here one process writes the file through one connection (GRDB's writer). Every change that
/// could make an entry wrong is seen before the next batch reads it:
/// - on the writer connection, TEMP triggers (they fire for the `WITHOUT ROWID` members table too, whose
///   changes GRDB's transaction observers do not see, and for foreign-key cascades) drop the entry of a
///   conversation whose row (id, transient, expires_at) or members (insert, delete, a change of cid, client_id
///   or joined_at) change, in any transaction, committed or not;
/// - any other connection's commit (another process, an operator's `sqlite3`) changes `PRAGMA data_version`,
///   read at the start of each batch inside its write transaction: then every entry is dropped.
/// Expiry is checked on use against the batch's time, as `ConversationTable.find` does (an expired temporary
/// conversation does not exist). PostgreSQL, where several nodes write, reads them in every batch.
final class BatchTargets: Sendable {
    struct Target: Sendable {
        var transient: Bool
        var expiresAt: Int64?
        /// Empty for a chat room (its members are the connections in it).
        var members: [String]

        func exists(at now: Int64) -> Bool { expiresAt.map { $0 > now } ?? true }
    }

    private struct State {
        var targets: [String: Target] = [:]
        var memberCount = 0
        var dataVersion: Int64?
    }

    private let state = Mutex(State())
    /// At most this many member ids are kept (then everything is dropped and read again).
    let memberLimit: Int
    /// At most this many conversations are kept.
    let conversationLimit: Int

    init(memberLimit: Int = 200_000, conversationLimit: Int = 10_000) {
        self.memberLimit = memberLimit
        self.conversationLimit = conversationLimit
    }

    /// Installs the triggers on the writer connection `db` (TEMP objects belong to that connection alone).
    func install(on db: Database) throws {
        db.add(
            function: DatabaseFunction("hookbot_batch_target_changed", argumentCount: 1, pure: false) { [self] values in
                if let cid = String.fromDatabaseValue(values[0]) { forget(cid) }
                return nil
            })
        try db.execute(
            sql: """
                CREATE TEMP TRIGGER hookbot_members_insert AFTER INSERT ON main.members
                BEGIN SELECT hookbot_batch_target_changed(NEW.cid); END;
                CREATE TEMP TRIGGER hookbot_members_delete AFTER DELETE ON main.members
                BEGIN SELECT hookbot_batch_target_changed(OLD.cid); END;
                CREATE TEMP TRIGGER hookbot_members_update AFTER UPDATE OF cid, client_id, joined_at ON main.members
                BEGIN SELECT hookbot_batch_target_changed(OLD.cid); SELECT hookbot_batch_target_changed(NEW.cid); END;
                CREATE TEMP TRIGGER hookbot_conversations_update AFTER UPDATE OF id, transient, expires_at ON main.conversations
                BEGIN SELECT hookbot_batch_target_changed(OLD.id); SELECT hookbot_batch_target_changed(NEW.id); END;
                CREATE TEMP TRIGGER hookbot_conversations_delete AFTER DELETE ON main.conversations
                BEGIN SELECT hookbot_batch_target_changed(OLD.id); END;
                """)
    }

    /// At a batch's start, inside its write transaction: drops everything when another connection committed
    /// since the last batch.
    func validate(_ db: Database) throws {
        let version = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA data_version"))
        state.withLock { state in
            if state.dataVersion != version {
                state.targets.removeAll()
                state.memberCount = 0
                state.dataVersion = version
            }
        }
    }

    /// The conversation `cid` as a batch at `now` sees it, or nil when it does not exist (or expired).
    func target(_ db: Database, cid: String, now: Int64) throws -> Target? {
        if let known = state.withLock({ $0.targets[cid] }) { return known.exists(at: now) ? known : nil }
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT transient, expires_at FROM conversations WHERE id = ?"), arguments: [cid])
        else { return nil }
        let transient: Bool = row[0]
        let expiresAt: Int64? = row[1]
        let target = Target(
            transient: transient, expiresAt: expiresAt, members: transient ? [] : try ConversationTable.members(db, cid: cid))
        state.withLock { state in
            if state.targets.count >= conversationLimit || state.memberCount + target.members.count > memberLimit {
                state.targets.removeAll()
                state.memberCount = 0
            }
            state.targets[cid] = target
            state.memberCount += target.members.count
        }
        return target.exists(at: now) ? target : nil
    }

    private func forget(_ cid: String) {
        state.withLock { state in
            if let gone = state.targets.removeValue(forKey: cid) { state.memberCount -= gone.members.count }
        }
    }

    /// How many conversations are kept (tests).
    var count: Int { state.withLock { $0.targets.count } }
}

/// The conversation and timestamp of the messages the last batches committed, so that a delivery cursor moved by
/// an ack of one of them needs no `SELECT t FROM messages` (in w1b those lookups were about 7 % of the writer
/// thread). Filled only after a commit succeeded; a message's id, conversation and timestamp never change once
/// stored (edits and recalls keep them), so an entry is what the database would answer. At most `capacity`: two
/// generations of up to half of it each (`GenerationalMap`): a ring with one removal per message cost more (each removal
/// from the 8,192-entry dictionary moved the entries after it; about 1 µs of the writer thread per committed message,
/// issue 30 round 7).
final class RecentMessages: Sendable {
    private let state: Mutex<GenerationalMap<String, (cid: String, t: Int64)>>
    let capacity: Int

    init(capacity: Int = 8_192) {
        self.capacity = capacity
        state = Mutex(GenerationalMap(generation: max(1, capacity / 2)))
    }

    /// Remembers a committed batch's stored messages (the older generation is forgotten when the newer is full).
    func remember(_ outcomes: [BatchOutcome]) {
        state.withLock { recent in
            for outcome in outcomes {
                guard case .stored(let record, _, _) = outcome else { continue }
                recent.insert((record.cid, record.t), for: record.id)
            }
        }
    }

    /// The timestamp of message `id` when it is a recent one of conversation `cid`.
    func timestamp(of id: String, in cid: String) -> Int64? {
        state.withLock { recent in recent[id].flatMap { $0.cid == cid ? $0.t : nil } }
    }

    /// How many messages are remembered (tests).
    var count: Int { state.withLock { $0.count } }
}
