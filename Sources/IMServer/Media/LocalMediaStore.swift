import Crypto
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// Where the records of stored files are kept (the server's own database): the local-directory backend
/// keeps bytes in files and records here. `SQLiteMediaRecords` is the SQLite table.
protocol MediaRecordTable: Sendable {
    /// Adds the record; `MediaError(.idTaken)` when its id exists.
    func insert(_ record: MediaRecord) async throws
    func find(_ id: String) async throws -> MediaRecord?
    /// Removes the record and answers it, with how many records still share its content.
    func remove(_ id: String) async throws -> (record: MediaRecord, sharing: Int)?
    /// How many records have this content.
    func count(sha256: String) async throws -> Int
    func usage(owner: String) async throws -> Int64
}

/// The local-directory backend: content-addressed files `objects/ab/abcdef…` (the SHA-256 in hex) under
/// one directory, written to `tmp/` first and renamed into place once whole, so a truncated upload, a
/// full disk or a crash never leaves a half file where it is served. Several records with the same
/// content share one file; the file goes with the last of them.
public final class LocalMediaStore: MediaStore {
    public let directory: URL
    let records: any MediaRecordTable
    /// Orders committing (rename + record) against deleting (record + unlink) of the same content.
    private let commitLock = Mutex<Set<String>>([])
    /// Bytes gathered before one write to disk.
    static let writeChunk = 256 * 1024
    /// Bytes of one chunk when reading.
    static let readChunk = 256 * 1024

    /// The directories are made at the first upload, so a server that never stores a file leaves none
    /// (and one whose media directory cannot be written to still starts: uploads answer 4606).
    init(directory: String, records: any MediaRecordTable) {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true).standardizedFileURL
        self.records = records
    }

    /// Where the content with this hash is (or would be) kept.
    public func path(sha256: String) -> String {
        directory.appendingPathComponent("objects").appendingPathComponent(String(sha256.prefix(2))).appendingPathComponent(sha256).path
    }

    public func store<Body: AsyncSequence>(_ upload: MediaUpload, body: Body) async throws -> MediaRecord
    where Body.Element == ByteBuffer {
        guard MediaIDs.isValid(upload.id) else { throw MediaError(.badRequest, "the media id \(upload.id) is not 1-64 of [A-Za-z0-9_-]") }
        if try await records.find(upload.id) != nil { throw MediaError(.idTaken, "the media id \(upload.id) is taken") }
        let tmp = directory.appendingPathComponent("tmp")
        let temp = tmp.appendingPathComponent(UUID().uuidString).path
        guard (try? FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)) != nil,
            FileManager.default.createFile(atPath: temp, contents: nil), let handle = FileHandle(forWritingAtPath: temp)
        else {
            throw MediaError(.storageFailed, "cannot create a file in \(directory.path)/tmp")
        }
        var kept = false
        defer {
            try? handle.close()
            if !kept { try? FileManager.default.removeItem(atPath: temp) }
        }
        var hasher = SHA256()
        var size: Int64 = 0
        var pending = ByteBuffer()
        let pool = NIOThreadPool.singleton
        func flush() async throws {
            guard pending.readableBytes > 0 else { return }
            let data = Data(pending.readableBytesView)
            pending.clear()
            do {
                try await pool.runIfActive { try handle.write(contentsOf: data) }
            } catch {
                throw MediaError(.storageFailed, "writing the upload failed (disk full?): \(error.localizedDescription)")
            }
        }
        do {
            for try await var chunk in body {
                size += Int64(chunk.readableBytes)
                if size > upload.maxBytes {
                    throw MediaError(.tooLarge, "the file passes the upload limit of \(upload.maxBytes) bytes")
                }
                chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
                pending.writeBuffer(&chunk)
                if pending.readableBytes >= Self.writeChunk { try await flush() }
            }
            try await flush()
        } catch let error as MediaError {
            throw error
        } catch {
            throw MediaError(.truncated, "the upload ended early: \(error)")
        }
        let sha = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        if let quota = upload.quotaBytes {
            let used = try await records.usage(owner: upload.owner)
            if used + size > quota {
                throw MediaError(
                    .quotaExceeded, "\(upload.owner) stores \(used) bytes; this file (\(size)) would pass the quota of \(quota)")
            }
        }
        let sniffed: MediaSniffer.Result
        do {
            sniffed = try await pool.runIfActive { try MediaSniffer.sniff(path: temp) }
        } catch {
            sniffed = MediaSniffer.Result(mime: "application/octet-stream")
        }
        let record = MediaRecord(
            id: upload.id, owner: upload.owner, name: MediaNames.clean(upload.name), declaredMIME: upload.declaredMIME,
            metadata: MediaMetadata(
                size: size, sha256: sha, mime: sniffed.mime, format: sniffed.format, width: sniffed.width, height: sniffed.height,
                duration: sniffed.duration),
            createdAt: Int64(Date().timeIntervalSince1970 * 1000))
        try? handle.synchronize()
        try await withContent(sha) {
            let target = path(sha256: sha)
            if !FileManager.default.fileExists(atPath: target) {
                do {
                    try FileManager.default.createDirectory(
                        atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                    guard rename(temp, target) == 0 else { throw MediaError(.storageFailed, String(cString: strerror(errno))) }
                    kept = true
                } catch {
                    throw MediaError(.storageFailed, "cannot move the upload into place: \(error)")
                }
            }
            do {
                try await records.insert(record)
            } catch {
                if kept, (try? await records.count(sha256: sha)) == 0 { try? FileManager.default.removeItem(atPath: target) }
                throw error
            }
        }
        return record
    }

    public func record(_ id: String) async throws -> MediaRecord? {
        guard MediaIDs.isValid(id), let record = try await records.find(id) else { return nil }
        // A record whose bytes this node does not have (another node of a cluster took the upload) is
        // not served from here rather than cut off mid-answer.
        return FileManager.default.fileExists(atPath: path(sha256: record.metadata.sha256)) ? record : nil
    }

    public func read(_ record: MediaRecord, range: Range<Int64>) -> AsyncThrowingStream<ByteBuffer, any Error> {
        // Pulled one chunk at a time (unfolding): the next read waits until the response has taken the
        // last one, so a slow reader holds at most a chunk or two in memory.
        let chunks = FileChunks(path: path(sha256: record.metadata.sha256), id: record.id, range: range)
        return AsyncThrowingStream(unfolding: { try await chunks.next() })
    }

    public func delete(_ id: String) async throws -> Bool {
        guard MediaIDs.isValid(id), let existing = try await records.find(id) else { return false }
        var removed = false
        try await withContent(existing.metadata.sha256) {
            guard let (record, sharing) = try await records.remove(id) else { return }
            removed = true
            if sharing == 0 { try? FileManager.default.removeItem(atPath: path(sha256: record.metadata.sha256)) }
        }
        return removed
    }

    public func usage(owner: String) async throws -> Int64 { try await records.usage(owner: owner) }

    /// Runs `body` while no other commit or delete of the same content runs.
    private func withContent(_ sha: String, _ body: () async throws -> Void) async throws {
        while !commitLock.withLock({ $0.insert(sha).inserted }) { try await Task.sleep(for: .milliseconds(2)) }
        defer { _ = commitLock.withLock { $0.remove(sha) } }
        try await body()
    }
}

/// Reads a byte range of one file in `LocalMediaStore.readChunk` pieces on the NIO thread pool. Used by
/// one iterator at a time (an `AsyncThrowingStream(unfolding:)` calls `next()` serially), hence unchecked.
private final class FileChunks: @unchecked Sendable {
    let path: String
    let id: String
    var offset: Int64
    let end: Int64
    var handle: FileHandle?

    init(path: String, id: String, range: Range<Int64>) {
        self.path = path
        self.id = id
        offset = range.lowerBound
        end = range.upperBound
    }

    func next() async throws -> ByteBuffer? {
        guard offset < end else {
            try? handle?.close()
            handle = nil
            return nil
        }
        let count = Int(min(Int64(LocalMediaStore.readChunk), end - offset))
        let (path, offset, opened) = (path, offset, handle)
        let (data, handle) = try await NIOThreadPool.singleton.runIfActive { () throws -> (Data, FileHandle) in
            let handle = opened ?? FileHandle(forReadingAtPath: path)
            guard let handle else { throw MediaError(.notFound, "the content of a stored file is missing from the media directory") }
            if opened == nil { try handle.seek(toOffset: UInt64(offset)) }
            return (try handle.read(upToCount: count) ?? Data(), handle)
        }
        self.handle = handle
        if data.isEmpty { throw MediaError(.truncated, "the content of \(id) is shorter than its record") }
        self.offset += Int64(data.count)
        return ByteBuffer(bytes: data)
    }
}
