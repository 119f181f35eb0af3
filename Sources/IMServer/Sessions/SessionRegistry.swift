import Synchronization

/// Which connections are logged in as which client id.
final class SessionRegistry: Sendable {
    private let table = Mutex<[String: [Connection]]>([:])

    func add(_ connection: Connection, clientID: String) {
        table.withLock { $0[clientID, default: []].append(connection) }
    }

    func remove(_ connection: Connection, clientID: String) {
        table.withLock { table in
            table[clientID]?.removeAll { $0 === connection }
            if table[clientID]?.isEmpty == true { table[clientID] = nil }
        }
    }

    func connections(of clientID: String) -> [Connection] {
        table.withLock { $0[clientID] ?? [] }
    }

    /// Every logged-in connection.
    var allConnections: [Connection] { table.withLock { $0.values.flatMap { $0 } } }
}
