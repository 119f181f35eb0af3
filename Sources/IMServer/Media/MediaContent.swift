import Foundation
import NIOCore
import PostgresNIO

/// Where the bytes of stored files live, apart from their records: the local directory
/// (`LocalMediaContent`) or the PostgreSQL database (`PostgresMediaContent`). Content is addressed by its
/// SHA-256 and written in two steps: bytes go to a pending place as they arrive (`begin()`), invisible to
/// readers, and once whole and checked they become the content of their hash, or are dropped when that
/// content exists already (`MediaContentWriter.commit`), inside the records' locked transaction so that a
/// commit never races a delete of the same content, on any node.
///
/// An S3-compatible backend fits the same shape (docs/DEPLOY.md, "S3 later"): `begin()` starts a multipart
/// upload under a pending key, `write` sends parts, `commit` copies the object to its hash's key (or aborts
/// when it exists), `read` is a ranged GET, `delete` a DELETE.
protocol MediaContent: Sendable {
    /// Starts a pending write.
    func begin() async throws -> any MediaContentWriter
    /// The bytes of content `sha256` in `range`, one chunk at a time, each read waiting for the consumer to
    /// take the previous one (backpressure). `id` names the file in errors.
    func read(sha256: String, range: Range<Int64>, id: String) -> AsyncThrowingStream<ByteBuffer, any Error>
    /// Whether this node can serve content `sha256` (a shared-nothing local directory may lack it).
    func has(sha256: String) async throws -> Bool
    /// Removes content `sha256`; called inside the records' locked transaction once no record uses it.
    func delete(sha256: String, in transaction: any MediaTransaction) async throws
    /// What is kept: committed contents and pending writes (tests, operators).
    func inventory() async throws -> MediaContentInventory
}

/// The contents a backend keeps.
struct MediaContentInventory: Sendable, Equatable {
    /// The SHA-256 of each committed content, sorted.
    var contents: [String]
    /// Pending writes (uploads in progress, or left by a crash until they are swept).
    var pending: Int
}

/// One pending write. Used by one upload at a time.
protocol MediaContentWriter: AnyObject, Sendable {
    /// Appends bytes (buffered up to the backend's chunk size). Throws `MediaError(.storageFailed)`.
    func write(_ buffer: ByteBuffer) async throws
    /// Writes what is buffered; the bytes are then all in the pending place.
    func finish() async throws
    /// The type, dimensions and duration of the written bytes (after `finish`).
    func sniff() async throws -> MediaSniffer.Result
    /// Makes the written bytes the content `sha256`, or drops them when that content exists already.
    /// Runs inside the records' transaction that holds the content's lock; answers whether these bytes
    /// became the content.
    func commit(sha256: String, size: Int64, in transaction: any MediaTransaction) async throws -> Bool
    /// Drops the pending bytes if they were not committed (idempotent; never throws).
    func discard() async
}

/// The records' side of a commit or delete: runs while the content lock (and for a commit the owner's
/// quota lock) is held, on every node that shares the database.
protocol MediaTransaction: Sendable {
    func insert(_ record: MediaRecord) async throws
    /// Removes the record and answers it, or nil.
    func remove(_ id: String) async throws -> MediaRecord?
    func count(sha256: String) async throws -> Int
    func usage(owner: String) async throws -> Int64
    /// The connection of the transaction when the records are in PostgreSQL (content kept in the same
    /// database commits with the record).
    var postgres: PostgresConnection? { get }
}
