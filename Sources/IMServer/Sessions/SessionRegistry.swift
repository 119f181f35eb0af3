import Synchronization

/// Which connections are logged in as which client id.
final class SessionRegistry: Sendable {
    private let table = Mutex<[String: [Connection]]>([:])

    /// Registers a logged-in connection. With a `tag`, the client id's other connections holding that tag
    /// are unregistered in the same step and returned, so that exactly one device holds a tag however
    /// many logins race (the caller kicks the returned ones).
    func add(_ connection: Connection, clientID: String, tag: String? = nil) -> [Connection] {
        table.withLock { table in
            var connections = table[clientID] ?? []
            var displaced: [Connection] = []
            if let tag {
                displaced = connections.filter { $0 !== connection && $0.identity?.tag == tag }
                connections.removeAll { other in displaced.contains { $0 === other } }
            }
            connections.append(connection)
            table[clientID] = connections
            return displaced
        }
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
