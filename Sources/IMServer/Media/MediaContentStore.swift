import Crypto
import Foundation
import IMCore
import NIOCore
import Synchronization

/// Where the records of stored files are kept (the server's own database: `SQLiteMediaRecords`,
/// `PostgresMediaRecords`).
protocol MediaRecordTable: Sendable {
    func find(_ id: String) async throws -> MediaRecord?
    /// Bytes stored by `owner` (the sum of its records' sizes).
    func usage(owner: String) async throws -> Int64
    /// Runs `body` holding the lock of content `sha256` and, when `owner` is given, the lock of that
    /// owner's quota, across every process that shares the records (PostgreSQL: transaction-scoped
    /// advisory locks, and the body's statements commit or roll back together). The caller holds the same
    /// locks within this process already (`KeyedLocks`), so SQLite needs nothing more.
    func locked<T: Sendable>(sha256: String, owner: String?, _ body: (any MediaTransaction) async throws -> T) async throws -> T
}

/// The media store: records in the server's database, bytes in a `MediaContent` backend.
///
/// An upload streams into a pending write, hashed as it arrives (never whole in memory), with its bytes
/// reserved against the owner's quota as they come (in this process), so concurrent uploads of one client
/// are refused as soon as together they would pass it. Then, holding the content's lock and the owner's
/// quota lock (on every node: see `MediaRecordTable.locked`), the quota is checked against the committed
/// sum, the pending bytes become the content (or are dropped when it exists: de-duplication) and the record
/// is inserted. On any error nothing is kept. A delete removes the record and, under the same content lock,
/// the content when no other record shares it.
final class ContentAddressedMediaStore: MediaStore {
    let records: any MediaRecordTable
    let content: any MediaContent
    private let locks = KeyedLocks()
    private let reservations = QuotaReservations()

    init(records: any MediaRecordTable, content: any MediaContent) {
        self.records = records
        self.content = content
    }

    func store<Body: AsyncSequence>(_ upload: MediaUpload, body: Body) async throws -> MediaRecord
    where Body.Element == ByteBuffer {
        guard MediaIDs.isValid(upload.id) else { throw MediaError(.badRequest, "the media id \(upload.id) is not 1-64 of [A-Za-z0-9_-]") }
        if try await records.find(upload.id) != nil { throw MediaError(.idTaken, "the media id \(upload.id) is taken") }
        let owner = upload.owner
        let committedAtStart = upload.quotaBytes == nil ? 0 : try await records.usage(owner: owner)
        let writer = try await content.begin()
        var reserved: Int64 = 0
        do {
            defer { reservations.release(owner, reserved) }
            var hasher = SHA256()
            var size: Int64 = 0
            do {
                for try await chunk in body {
                    let count = Int64(chunk.readableBytes)
                    size += count
                    if size > upload.maxBytes {
                        throw MediaError(.tooLarge, "the file passes the upload limit of \(upload.maxBytes) bytes")
                    }
                    if let quota = upload.quotaBytes {
                        try reservations.reserve(owner, count, committed: committedAtStart, quota: quota)
                        reserved += count
                    }
                    chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                    try await writer.write(chunk)
                }
                try await writer.finish()
            } catch let error as MediaError {
                throw error
            } catch {
                throw MediaError(.truncated, "the upload ended early: \(error)")
            }
            let sha = hasher.finalize().map { String(format: "%02x", $0) }.joined()
            let sniffed = (try? await writer.sniff()) ?? MediaSniffer.Result(mime: "application/octet-stream")
            let record = MediaRecord(
                id: upload.id, owner: owner, name: MediaNames.clean(upload.name), declaredMIME: upload.declaredMIME,
                metadata: MediaMetadata(
                    size: size, sha256: sha, mime: sniffed.mime, format: sniffed.format, width: sniffed.width, height: sniffed.height,
                    duration: sniffed.duration),
                createdAt: Int64(Date().timeIntervalSince1970 * 1000))
            let quota = upload.quotaBytes
            try await locks.withLocks(["content:" + sha] + (quota == nil ? [] : ["owner:" + owner])) {
                try await records.locked(sha256: sha, owner: quota == nil ? nil : owner) { transaction in
                    if let quota {
                        let used = try await transaction.usage(owner: owner)
                        if used + size > quota {
                            throw MediaError(
                                .quotaExceeded, "\(owner) stores \(used) bytes; this file (\(size)) would pass the quota of \(quota)")
                        }
                    }
                    let placed = try await writer.commit(sha256: sha, size: size, in: transaction)
                    // Released before the record counts, never after: an upload starting now reads the
                    // committed sum and must not count these bytes twice (refusing what fits); until the
                    // record is in, the commit-time check above is what holds.
                    reservations.release(owner, reserved)
                    reserved = 0
                    do {
                        try await transaction.insert(record)
                    } catch {
                        if placed, (try? await transaction.count(sha256: sha)) == 0 {
                            try? await content.delete(sha256: sha, in: transaction)
                        }
                        throw error
                    }
                }
            }
            return record
        } catch {
            await writer.discard()
            throw error
        }
    }

    func record(_ id: String) async throws -> MediaRecord? {
        guard MediaIDs.isValid(id), let record = try await records.find(id) else { return nil }
        // A record whose bytes this node does not have (a local directory not shared by the nodes of a
        // cluster) is not served from here rather than cut off mid-answer.
        return try await content.has(sha256: record.metadata.sha256) ? record : nil
    }

    func read(_ record: MediaRecord, range: Range<Int64>) -> AsyncThrowingStream<ByteBuffer, any Error> {
        content.read(sha256: record.metadata.sha256, range: range, id: record.id)
    }

    func delete(_ id: String) async throws -> Bool {
        guard MediaIDs.isValid(id), let existing = try await records.find(id) else { return false }
        let sha = existing.metadata.sha256
        return try await locks.withLocks(["content:" + sha]) {
            try await records.locked(sha256: sha, owner: nil) { transaction in
                guard try await transaction.remove(id) != nil else { return false }
                if try await transaction.count(sha256: sha) == 0 { try await content.delete(sha256: sha, in: transaction) }
                return true
            }
        }
    }

    func usage(owner: String) async throws -> Int64 { try await records.usage(owner: owner) }

    /// What the content backend keeps (tests).
    func inventory() async throws -> MediaContentInventory { try await content.inventory() }
}

/// Bytes of uploads in flight, by owner: an upload reserves its bytes as they arrive, so that together with
/// the owner's committed bytes (read when the upload began) they cannot pass the quota. The check at commit
/// (in the records' transaction) is the one that counts; this one refuses early, before a body that cannot
/// fit has been streamed whole.
final class QuotaReservations: Sendable {
    private let inFlight = Mutex<[String: Int64]>([:])

    func reserve(_ owner: String, _ bytes: Int64, committed: Int64, quota: Int64) throws {
        let refused = inFlight.withLock { inFlight -> Int64? in
            let reserved = inFlight[owner, default: 0]
            if committed + reserved + bytes > quota { return reserved }
            inFlight[owner] = reserved + bytes
            return nil
        }
        if let refused {
            throw MediaError(
                .quotaExceeded,
                "\(owner) stores \(committed) bytes and uploads \(refused) more at once; this file would pass the quota of \(quota)")
        }
    }

    func release(_ owner: String, _ bytes: Int64) {
        guard bytes > 0 else { return }
        inFlight.withLock { inFlight in
            let left = inFlight[owner, default: 0] - bytes
            inFlight[owner] = left > 0 ? left : nil
        }
    }
}

/// Async locks by name, granted in arrival order (FIFO), for this process.
final class KeyedLocks: Sendable {
    private let waiting = Mutex<[String: [CheckedContinuation<Void, Never>]]>([:])

    /// Runs `body` holding every lock of `keys`, taken in the order given (callers take them in one fixed
    /// order: content, then owner).
    func withLocks<T>(_ keys: [String], _ body: () async throws -> T) async throws -> T {
        var held: [String] = []
        defer { for key in held.reversed() { unlock(key) } }
        for key in keys {
            await lock(key)
            held.append(key)
        }
        return try await body()
    }

    private func lock(_ key: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let acquired = waiting.withLock { waiting -> Bool in
                guard waiting[key] != nil else {
                    waiting[key] = []
                    return true
                }
                waiting[key]!.append(continuation)
                return false
            }
            if acquired { continuation.resume() }
        }
    }

    private func unlock(_ key: String) {
        let next = waiting.withLock { waiting -> CheckedContinuation<Void, Never>? in
            guard var queue = waiting[key], !queue.isEmpty else {
                waiting[key] = nil
                return nil
            }
            let next = queue.removeFirst()
            waiting[key] = queue
            return next
        }
        next?.resume()
    }
}
