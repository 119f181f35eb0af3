import Foundation

enum MediaStores {
    /// The media store of a server: records in its SQLite file or PostgreSQL database; bytes in the media
    /// directory (SQLite, or PostgreSQL with `contentInDirectory`) or in the PostgreSQL database, so every
    /// node of a cluster serves every file.
    static func open(_ configuration: ServerConfiguration, store: any ServerStore) throws -> (any MediaStore)? {
        let directory = configuration.media.resolvedDirectory(databasePath: configuration.databasePath)
        if let sqlite = store as? SQLiteStore {
            return ContentAddressedMediaStore(records: SQLiteMediaRecords(db: sqlite.db), content: LocalMediaContent(directory: directory))
        }
        if let postgres = store as? PostgresStore {
            let content: any MediaContent =
                configuration.media.contentInDirectory ? LocalMediaContent(directory: directory) : PostgresMediaContent(store: postgres)
            return ContentAddressedMediaStore(records: PostgresMediaRecords(store: postgres), content: content)
        }
        return nil
    }
}
