import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// The local-directory content backend: content-addressed files `objects/ab/abcdef…` (the SHA-256 in hex)
/// under one directory, written to `tmp/` first and renamed into place once whole, so a truncated upload, a
/// full disk or a crash never leaves a half file where it is served. Several records with the same content
/// share one file; the file goes with the last of them (`ContentAddressedMediaStore`).
final class LocalMediaContent: MediaContent {
    let directory: URL
    /// Bytes gathered before one write to disk.
    static let writeChunk = 256 * 1024
    /// Bytes of one chunk when reading.
    static let readChunk = 256 * 1024
    /// A temporary file untouched this long is a crashed upload's leftover.
    static let abandonedAfter: TimeInterval = 3600
    private let sweptAt = Mutex<Date?>(nil)

    /// The directories are made at the first upload, so a server that never stores a file leaves none
    /// (and one whose media directory cannot be written to still starts: uploads answer 4606).
    init(directory: String) {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true).standardizedFileURL
    }

    /// Where the content with this hash is (or would be) kept.
    func path(sha256: String) -> String {
        directory.appendingPathComponent("objects").appendingPathComponent(String(sha256.prefix(2))).appendingPathComponent(sha256).path
    }

    func begin() async throws -> any MediaContentWriter {
        sweepIfDue()
        let tmp = directory.appendingPathComponent("tmp")
        let temp = tmp.appendingPathComponent(UUID().uuidString).path
        // On the thread pool: making a file can wait for the filesystem (inode allocation, the journal), and
        // must not hold one of Swift's few cooperative threads meanwhile.
        let handle = try await NIOThreadPool.singleton.runIfActive { () -> FileHandle? in
            guard (try? FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)) != nil,
                FileManager.default.createFile(atPath: temp, contents: nil)
            else { return nil }
            return FileHandle(forWritingAtPath: temp)
        }
        guard let handle else { throw MediaError(.storageFailed, "cannot create a file in \(directory.path)/tmp") }
        return LocalContentWriter(content: self, temp: temp, handle: handle)
    }

    func read(sha256: String, range: Range<Int64>, id: String) -> AsyncThrowingStream<ByteBuffer, any Error> {
        // Pulled one chunk at a time (unfolding): the next read waits until the response has taken the
        // last one, so a slow reader holds at most a chunk or two in memory.
        let chunks = FileChunks(path: path(sha256: sha256), id: id, range: range)
        return AsyncThrowingStream(unfolding: { try await chunks.next() })
    }

    func has(sha256: String) async throws -> Bool { FileManager.default.fileExists(atPath: path(sha256: sha256)) }

    func delete(sha256: String, in transaction: any MediaTransaction) async throws {
        try? FileManager.default.removeItem(atPath: path(sha256: sha256))
    }

    func inventory() async throws -> MediaContentInventory {
        let objects = directory.appendingPathComponent("objects").path
        let contents = (FileManager.default.subpaths(atPath: objects) ?? []).filter { $0.count > 3 }.map {
            ($0 as NSString).lastPathComponent
        }
        let pending = (try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("tmp").path)) ?? []
        return MediaContentInventory(contents: contents.sorted(), pending: pending.count)
    }

    /// Removes temporary files a crashed server left (untouched for `abandonedAfter`): at the first upload
    /// after start, then at most every ten minutes.
    private func sweepIfDue() {
        let now = Date()
        let due = sweptAt.withLock { last -> Bool in
            guard last.map({ now.timeIntervalSince($0) > 600 }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        let tmp = directory.appendingPathComponent("tmp")
        Task.detached(priority: .background) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: tmp.path)) ?? []
            for name in names {
                let path = tmp.appendingPathComponent(name).path
                let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate]) as? Date
                if let modified, now.timeIntervalSince(modified) > Self.abandonedAfter { try? FileManager.default.removeItem(atPath: path) }
            }
        }
    }
}

/// One upload into `tmp/<uuid>`: 256 KiB writes on NIO's thread pool; renamed into `objects/` at commit.
/// Used by one upload at a time, hence unchecked.
///
/// Received buffers are gathered into one (a copy in cache) and written with one `write(2)` each 256 KiB, not
/// copied again into a `Data` first.
/// The final `fsync` runs on `syncPool`, not on NIO's thread pool (one thread a core): many uploads' fsyncs
/// then wait side by side, and the filesystem's journal commits them together, instead of two at a time
/// with every other file operation queued behind them.
private final class LocalContentWriter: MediaContentWriter, @unchecked Sendable {
    let content: LocalMediaContent
    let temp: String
    let handle: FileHandle
    var pending = ByteBuffer()
    var closed = false

    /// Threads that only wait in `fsync` (no CPU): enough for a burst of small uploads to sync together.
    static let syncPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 32)
        pool.start()
        return pool
    }()

    init(content: LocalMediaContent, temp: String, handle: FileHandle) {
        self.content = content
        self.temp = temp
        self.handle = handle
    }

    func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        pending.writeBuffer(&buffer)
        if pending.readableBytes >= LocalMediaContent.writeChunk { try await flush() }
    }

    private func flush() async throws {
        guard pending.readableBytes > 0 else { return }
        let (buffer, descriptor) = (pending, handle.fileDescriptor)
        do {
            try await NIOThreadPool.singleton.runIfActive { try Self.write(buffer, to: descriptor) }
        } catch {
            throw MediaError(.storageFailed, "writing the upload failed (disk full?): \(error.localizedDescription)")
        }
        pending.clear()
    }

    private static func write(_ buffer: ByteBuffer, to descriptor: Int32) throws {
        try buffer.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = posixWrite(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
                }
                offset += written
            }
        }
    }

    func finish() async throws {
        try await flush()
        let handle = handle
        do {
            try await Self.syncPool.runIfActive { try handle.synchronize() }
        } catch {
            throw MediaError(.storageFailed, "writing the upload failed (disk full?): \(error.localizedDescription)")
        }
    }

    func sniff() async throws -> MediaSniffer.Result {
        let temp = temp
        return try await NIOThreadPool.singleton.runIfActive { try MediaSniffer.sniff(path: temp) }
    }

    func commit(sha256: String, size: Int64, in transaction: any MediaTransaction) async throws -> Bool {
        close()
        let (target, temp) = (content.path(sha256: sha256), temp)
        // On the thread pool, as in `begin`: a new objects/ab/ directory waits for the filesystem.
        return try await NIOThreadPool.singleton.runIfActive {
            if FileManager.default.fileExists(atPath: target) {
                try? FileManager.default.removeItem(atPath: temp)
                return false
            }
            do {
                try FileManager.default.createDirectory(
                    atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            } catch {
                throw MediaError(.storageFailed, "cannot move the upload into place: \(error)")
            }
            guard rename(temp, target) == 0 else {
                throw MediaError(.storageFailed, "cannot move the upload into place: \(String(cString: strerror(errno)))")
            }
            return true
        }
    }

    func discard() async {
        close()
        try? FileManager.default.removeItem(atPath: temp)
    }

    private func close() {
        guard !closed else { return }
        closed = true
        try? handle.close()
    }
}

/// write(2), named apart from the writers' own `write` methods.
private func posixWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int { write(descriptor, bytes, count) }

/// Reads a byte range of one file in `LocalMediaContent.readChunk` pieces on the NIO thread pool. Used by
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
        let count = Int(min(Int64(LocalMediaContent.readChunk), end - offset))
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
