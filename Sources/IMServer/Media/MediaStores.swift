import Foundation

enum MediaStores {
    /// The media store of a server: the local-directory backend, with its records in the server's SQLite
    /// file or PostgreSQL database (there the bytes stay on the node that took them until the PostgreSQL
    /// content backend exists).
    static func open(_ configuration: ServerConfiguration, store: any ServerStore) throws -> (any MediaStore)? {
        let directory = configuration.media.resolvedDirectory(databasePath: configuration.databasePath)
        if let sqlite = store as? SQLiteStore {
            return LocalMediaStore(directory: directory, records: SQLiteMediaRecords(db: sqlite.db))
        }
        if let postgres = store as? PostgresStore {
            return LocalMediaStore(directory: directory, records: PostgresMediaRecords(store: postgres))
        }
        return nil
    }
}
