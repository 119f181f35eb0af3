import Synchronization

/// Who is in which chat room. A connection is in at most one room; rooms exist only in memory.
final class ChatRooms: Sendable {
    private struct State {
        var roomOf: [UInt64: String] = [:]
        var occupants: [String: [UInt64: Connection]] = [:]
        /// `occupants`' connections of a room as an array, made on the first fan-out after a change: a big
        /// room's every message then shares one array instead of copying (and retaining) all its members.
        var lists: [String: [Connection]] = [:]
    }

    private let state = Mutex(State())

    /// Puts the connection in `cid`, leaving the room it was in; returns the room it left.
    @discardableResult
    func enter(_ connection: Connection, room cid: String) -> String? {
        state.withLock { state in
            let previous = state.roomOf[connection.id]
            if let previous, previous != cid {
                state.occupants[previous]?[connection.id] = nil
                state.lists[previous] = nil
            }
            state.roomOf[connection.id] = cid
            state.occupants[cid, default: [:]][connection.id] = connection
            state.lists[cid] = nil
            return previous == cid ? nil : previous
        }
    }

    /// Takes the connection out of its room, if it is in `cid` (or in any room when `cid` is nil).
    func leave(_ connection: Connection, room cid: String? = nil) {
        state.withLock { state in
            guard let current = state.roomOf[connection.id], cid == nil || cid == current else { return }
            state.roomOf[connection.id] = nil
            state.occupants[current]?[connection.id] = nil
            state.lists[current] = nil
            if state.occupants[current]?.isEmpty == true { state.occupants[current] = nil }
        }
    }

    func connections(in cid: String) -> [Connection] {
        state.withLock { state in
            if let list = state.lists[cid] { return list }
            guard let occupants = state.occupants[cid] else { return [] }
            let list = Array(occupants.values)
            state.lists[cid] = list
            return list
        }
    }

    /// Distinct client ids present in the room.
    func clientIDs(in cid: String) -> Set<String> {
        Set(connections(in: cid).compactMap(\.clientID))
    }

    func room(of connection: Connection) -> String? {
        state.withLock { $0.roomOf[connection.id] }
    }
}
