import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// File bytes in the PostgreSQL database, so every node of a cluster serves every file with no shared file
/// system (migration 7, `media-content`).
///
/// Chunked `bytea` rows rather than large objects: rows live in the server's schema (large objects are
/// database-wide, outside any schema, and need `lo_unlink` bookkeeping of their own), commit and roll back
/// with the record in one ordinary transaction, are deleted by a cascade, and a download reads one chunk per
/// statement on any pooled connection (a large object is read through a descriptor that lives only as long
/// as one transaction, so a slow download would hold a connection and a transaction open). postgres-nio has
/// no large-object API either. The chunks are `STORAGE EXTERNAL` (out of line, not compressed: media is
/// compressed already), which also lets `substring` fetch only the slice a `Range` asks for.
///
/// - `media_blobs`: one row a content (`sha256`, `size`, `chunk_size`), or a pending upload (`sha256` NULL,
///   `touched_at` renewed by every chunk written).
/// - `media_chunks`: `(blob, seq)` → `data`, `chunk_size` bytes each (the last one shorter); deleted with
///   their blob (`ON DELETE CASCADE`).
///
/// An upload inserts its chunks as they arrive under a new pending blob; the commit (in the records'
/// transaction, holding the content's advisory lock) names the blob by its hash, or deletes it when that
/// content exists already. A failed upload deletes its pending blob; one a crashed node left (untouched for
/// an hour) is deleted by the next upload's sweep on any node.
final class PostgresMediaContent: MediaContent {
    let store: PostgresStore
    /// Bytes of one row: 512 KiB, a few hundred rows for a 100 MB file and at most a chunk and a half of
    /// memory for an upload or a download in flight.
    static let chunkSize = 512 * 1024
    /// A pending blob untouched this long (milliseconds) is a crashed upload's leftover.
    static let abandonedAfter: Int64 = 3_600_000
    private let sweptAt = Mutex<Int64?>(nil)

    init(store: PostgresStore) {
        self.store = store
    }

    static func tables(schema s: String) -> [String] {
        [
            """
            CREATE TABLE \(s).media_blobs (
                id BIGSERIAL PRIMARY KEY,
                sha256 TEXT UNIQUE,
                size BIGINT NOT NULL DEFAULT 0,
                chunk_size INT NOT NULL,
                touched_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX media_blobs_pending ON \(s).media_blobs (touched_at) WHERE sha256 IS NULL",
            """
            CREATE TABLE \(s).media_chunks (
                blob BIGINT NOT NULL REFERENCES \(s).media_blobs (id) ON DELETE CASCADE,
                seq INT NOT NULL,
                data BYTEA NOT NULL,
                PRIMARY KEY (blob, seq)
            )
            """,
            "ALTER TABLE \(s).media_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
        ]
    }

    func begin() async throws -> any MediaContentWriter {
        await sweepIfDue()
        let now = Identifiers.nowMillis()
        let chunkSize = Int32(Self.chunkSize)
        let row: PostgresRow?
        do {
            row = try await store.fetch(
                "INSERT INTO media_blobs (chunk_size, touched_at) VALUES (\(chunkSize), \(now)) RETURNING id"
            ).first
        } catch {
            throw MediaError(.storageFailed, "cannot start the upload in the database: \(String(reflecting: error))")
        }
        guard let id = try row?.decode(Int64.self) else { throw MediaError(.storageFailed, "cannot start the upload in the database") }
        return PostgresContentWriter(content: self, blob: id)
    }

    func read(sha256: String, range: Range<Int64>, id: String) -> AsyncThrowingStream<ByteBuffer, any Error> {
        let chunks = PostgresChunks(content: self, sha256: sha256, id: id, range: range)
        return AsyncThrowingStream(unfolding: { try await chunks.next() })
    }

    func has(sha256: String) async throws -> Bool {
        try await !store.fetch("SELECT 1 FROM media_blobs WHERE sha256 = \(sha256)").isEmpty
    }

    func delete(sha256: String, in transaction: any MediaTransaction) async throws {
        guard let connection = transaction.postgres else { throw Self.needsPostgresRecords }
        _ = try await connection.query("DELETE FROM media_blobs WHERE sha256 = \(sha256)", logger: store.logger).collect()
    }

    func inventory() async throws -> MediaContentInventory {
        let contents = try await store.fetch("SELECT sha256 FROM media_blobs WHERE sha256 IS NOT NULL ORDER BY sha256").map {
            try $0.decode(String.self)
        }
        let pending = try await store.fetch("SELECT COUNT(*) FROM media_blobs WHERE sha256 IS NULL").first?.decode(Int64.self) ?? 0
        return MediaContentInventory(contents: contents, pending: Int(pending))
    }

    static let needsPostgresRecords = MediaError(.storageFailed, "content in PostgreSQL needs its records in the same database")

    /// One chunk's bytes, or the slice `[from, from + count)` of it.
    func chunk(blob: Int64, seq: Int32, from: Int32 = 0, count: Int32? = nil) async throws -> ByteBuffer? {
        let rows: [PostgresRow]
        if let count {
            rows = try await store.fetch(
                "SELECT substring(data FROM \(from + 1) FOR \(count)) FROM media_chunks WHERE blob = \(blob) AND seq = \(seq)")
        } else {
            rows = try await store.fetch("SELECT data FROM media_chunks WHERE blob = \(blob) AND seq = \(seq)")
        }
        return try rows.first?.decode(ByteBuffer.self)
    }

    /// Deletes pending blobs untouched for `abandonedAfter`: at the first upload after start, then at most
    /// every ten minutes (in the background: the upload does not wait for it).
    private func sweepIfDue() async {
        let now = Identifiers.nowMillis()
        let due = sweptAt.withLock { last -> Bool in
            guard last.map({ now - $0 > 600_000 }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        let store = store
        Task.detached(priority: .background) {
            let before = now - Self.abandonedAfter
            _ = try? await store.fetch("DELETE FROM media_blobs WHERE sha256 IS NULL AND touched_at < \(before)")
        }
    }
}

/// One upload's pending blob: bytes gathered to `chunkSize`, each chunk one `INSERT` (which also renews the
/// blob's `touched_at`, and fails if the blob was swept). The first chunk is kept until `sniff`, so a file of
/// one chunk is sniffed without reading it back. Used by one upload at a time, hence unchecked.
private final class PostgresContentWriter: MediaContentWriter, @unchecked Sendable {
    let content: PostgresMediaContent
    let blob: Int64
    var pending = ByteBuffer()
    var seq: Int32 = 0
    var size: Int64 = 0
    var head: ByteBuffer?

    init(content: PostgresMediaContent, blob: Int64) {
        self.content = content
        self.blob = blob
    }

    func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        size += Int64(buffer.readableBytes)
        pending.writeBuffer(&buffer)
        while pending.readableBytes >= PostgresMediaContent.chunkSize {
            try await insert(pending.readSlice(length: PostgresMediaContent.chunkSize)!)
        }
        pending.discardReadBytes()
    }

    func finish() async throws {
        if pending.readableBytes > 0 { try await insert(pending.readSlice(length: pending.readableBytes)!) }
        pending = ByteBuffer()
    }

    /// Each chunk commits without waiting for its WAL to reach the disk (`synchronous_commit` off for that
    /// statement): a chunk matters only once the blob is committed, and that commit (synchronous, as the
    /// server's are) flushes the WAL up to its own record, so every chunk written before it too. A crash
    /// before that loses only a pending upload.
    private func insert(_ piece: ByteBuffer) async throws {
        if seq == 0 { head = piece }
        let (blob, seq, now) = (blob, seq, Identifiers.nowMillis())
        let rows: [PostgresRow]
        do {
            rows = try await content.store.fetch(
                """
                WITH quick AS (SELECT set_config('synchronous_commit', 'off', true)),
                    pending AS (UPDATE media_blobs SET touched_at = \(now) WHERE id = \(blob) AND sha256 IS NULL RETURNING id)
                INSERT INTO media_chunks (blob, seq, data) SELECT id, \(seq), \(piece) FROM pending, quick RETURNING seq
                """)
        } catch {
            throw MediaError(.storageFailed, "writing the upload to the database failed: \(String(reflecting: error))")
        }
        guard !rows.isEmpty else { throw MediaError(.storageFailed, "the upload was idle so long that it was swept as abandoned") }
        self.seq += 1
    }

    func sniff() async throws -> MediaSniffer.Result {
        let (content, blob, size) = (content, blob, size)
        let chunkSize = Int64(PostgresMediaContent.chunkSize)
        let head = Array((head ?? ByteBuffer()).readableBytesView)
        self.head = nil
        return try await NIOThreadPool.singleton.runIfActive {
            // The sniffer reads synchronously, a few KiB at a time; chunks past the first are fetched whole,
            // the last two kept.
            var cache: [Int32: [UInt8]] = [0: head]
            var order: [Int32] = []
            return try MediaSniffer.sniff(size: size) { offset, count in
                guard offset >= 0, offset < size, count > 0 else { return [] }
                var bytes: [UInt8] = []
                var at = offset
                let end = min(size, offset + Int64(count))
                while at < end {
                    let seq = Int32(at / chunkSize)
                    let chunk: [UInt8]
                    if let cached = cache[seq] {
                        chunk = cached
                    } else {
                        let fetched = try Blocking.run { try await content.chunk(blob: blob, seq: seq) }
                        chunk = Array((fetched ?? ByteBuffer()).readableBytesView)
                        if order.count >= 2 { cache[order.removeFirst()] = nil }
                        order.append(seq)
                        cache[seq] = chunk
                    }
                    let within = Int(at % chunkSize)
                    let take = min(chunk.count - within, Int(end - at))
                    guard take > 0 else { break }
                    bytes += chunk[within..<within + take]
                    at += Int64(take)
                }
                return bytes
            }
        }
    }

    func commit(sha256: String, size: Int64, in transaction: any MediaTransaction) async throws -> Bool {
        guard let connection = transaction.postgres else { throw PostgresMediaContent.needsPostgresRecords }
        let logger = content.store.logger
        let existing = try await connection.query("SELECT id FROM media_blobs WHERE sha256 = \(sha256)", logger: logger).collect()
        if !existing.isEmpty {
            _ = try await connection.query("DELETE FROM media_blobs WHERE id = \(blob) AND sha256 IS NULL", logger: logger).collect()
            return false
        }
        let moved = try await connection.query(
            "UPDATE media_blobs SET sha256 = \(sha256), size = \(size) WHERE id = \(blob) AND sha256 IS NULL RETURNING id", logger: logger
        ).collect()
        guard !moved.isEmpty else { throw MediaError(.storageFailed, "the upload was idle so long that it was swept as abandoned") }
        return true
    }

    func discard() async {
        head = nil
        pending = ByteBuffer()
        _ = try? await content.store.fetch("DELETE FROM media_blobs WHERE id = \(blob) AND sha256 IS NULL")
    }
}

/// Reads a byte range of one content a chunk at a time (`substring` of the rows covering it), each read
/// waiting until the consumer took the last chunk. Used by one iterator at a time, hence unchecked.
private final class PostgresChunks: @unchecked Sendable {
    let content: PostgresMediaContent
    let sha256: String
    let id: String
    var offset: Int64
    let end: Int64
    var blob: (id: Int64, chunkSize: Int64)?

    init(content: PostgresMediaContent, sha256: String, id: String, range: Range<Int64>) {
        self.content = content
        self.sha256 = sha256
        self.id = id
        offset = range.lowerBound
        end = range.upperBound
    }

    func next() async throws -> ByteBuffer? {
        guard offset < end else { return nil }
        if blob == nil {
            guard
                let row = try await content.store.fetch("SELECT id, chunk_size FROM media_blobs WHERE sha256 = \(sha256)").first
            else { throw MediaError(.notFound, "the content of \(id) is not in the database") }
            let (blobID, chunkSize) = try row.decode((Int64, Int32).self)
            blob = (blobID, Int64(chunkSize))
        }
        let (blobID, chunkSize) = blob!
        let seq = Int32(offset / chunkSize)
        let within = offset % chunkSize
        let count = min(chunkSize - within, end - offset)
        guard
            let bytes = try await content.chunk(blob: blobID, seq: seq, from: Int32(within), count: Int32(count)),
            bytes.readableBytes > 0
        else { throw MediaError(.truncated, "the content of \(id) is shorter than its record") }
        offset += Int64(bytes.readableBytes)
        return bytes
    }
}

/// Runs async work from a synchronous caller on a thread that may block (NIO's thread pool, never the
/// cooperative pool): the work runs as a task, the caller waits on a semaphore.
enum Blocking {
    private final class Outcome<T>: @unchecked Sendable {
        var value: Result<T, any Error>?
    }

    static func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
        let outcome = Outcome<T>()
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                outcome.value = .success(try await operation())
            } catch {
                outcome.value = .failure(error)
            }
            done.signal()
        }
        done.wait()
        return try outcome.value!.get()
    }
}
