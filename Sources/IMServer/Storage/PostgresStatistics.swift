import PostgresNIO

extension PostgresStore {
    /// Transactions the database has committed so far (all clients'), from `pg_stat_database`.
    func committedTransactions() async throws -> Int {
        let rows = try await client.query("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }
}
