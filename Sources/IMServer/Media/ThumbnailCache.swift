import Foundation
import MediaImaging
import NIOPosix
import Synchronization

/// Thumbnails kept on local disk by (content SHA-256, normalised request), so the same thumbnail of the same
/// bytes is made once: `<media dir>/thumbs/<first two hex digits>/<sha256>_<request>.<format>`.
///
/// - Written atomically: to a hidden temporary file in the same directory, then renamed into place, so a
///   reader never sees half a thumbnail.
/// - Capped in bytes: when the total passes the capacity, the least recently used thumbnails go until it is
///   below 90 % of it. Use is the file's modification time (touched on every hit), so the order survives a
///   restart; the index is rebuilt from the directory at the first use after a start.
/// - Only a cache: a file that vanished (the directory removed by hand while the server runs) is a miss and
///   is made again; nothing else depends on it. Capacity 0 keeps nothing.
/// - Per node: in a cluster each node keeps the thumbnails it made.
final class ThumbnailCache: Sendable {
    struct Key: Hashable, Sendable {
        /// The content's SHA-256 (hex).
        var sha256: String
        /// `MediaThumbnails.tag`: mode, sizes, quality, format (`[0-9a-z-]` only).
        var request: String
    }

    private struct Entry {
        var size: Int64
        var used: Date
        var format: ImageFormat
    }

    private struct State {
        var loaded = false
        var entries: [Key: Entry] = [:]
        var total: Int64 = 0
    }

    let directory: URL
    let capacity: Int64
    private let state = Mutex(State())

    init(directory: String, capacity: Int64) {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true)
        self.capacity = max(0, capacity)
    }

    /// Bytes of thumbnails kept now.
    var totalBytes: Int64 { state.withLock { $0.total } }

    private func url(_ key: Key, _ format: ImageFormat) -> URL {
        directory.appendingPathComponent(String(key.sha256.prefix(2)), isDirectory: true)
            .appendingPathComponent("\(key.sha256)_\(key.request).\(format.rawValue)")
    }

    /// The kept thumbnail, or nil.
    func get(_ key: Key) async -> (bytes: [UInt8], format: ImageFormat)? {
        guard capacity > 0 else { return nil }
        await loadIfNeeded()
        guard let entry = state.withLock({ $0.entries[key] }) else { return nil }
        let url = url(key, entry.format)
        let bytes = try? await NIOThreadPool.singleton.runIfActive { () throws -> [UInt8] in
            let data = try Data(contentsOf: url)
            try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: url.path)
            return [UInt8](data)
        }
        guard let bytes else {
            // Removed behind the server's back: forget it, and the thumbnail is made again.
            state.withLock { state in
                if let gone = state.entries.removeValue(forKey: key) { state.total -= gone.size }
            }
            return nil
        }
        state.withLock { $0.entries[key]?.used = Date() }
        return (bytes, entry.format)
    }

    /// Keeps a thumbnail (unless it alone is larger than the capacity), evicting the least recently used.
    func put(_ key: Key, bytes: [UInt8], format: ImageFormat) async {
        guard capacity > 0, Int64(bytes.count) <= capacity else { return }
        await loadIfNeeded()
        let target = url(key, format)
        let written =
            (try? await NIOThreadPool.singleton.runIfActive { () throws -> Bool in
                let folder = target.deletingLastPathComponent()
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                let temporary = folder.appendingPathComponent(".tmp-\(UUID().uuidString)")
                do {
                    try Data(bytes).write(to: temporary)
                    guard rename(temporary.path, target.path) == 0 else { throw CocoaError(.fileWriteUnknown) }
                } catch {
                    try? FileManager.default.removeItem(at: temporary)
                    throw error
                }
                return true
            }) ?? false
        guard written else { return }
        let evicted: [(Key, Entry)] = state.withLock { state in
            if let old = state.entries.updateValue(Entry(size: Int64(bytes.count), used: Date(), format: format), forKey: key) {
                state.total -= old.size
            }
            state.total += Int64(bytes.count)
            guard state.total > capacity else { return [] }
            var gone: [(Key, Entry)] = []
            let target = capacity / 10 * 9
            for (oldKey, entry) in state.entries.sorted(by: { $0.value.used < $1.value.used }) where state.total > target {
                guard oldKey != key else { continue }
                state.entries[oldKey] = nil
                state.total -= entry.size
                gone.append((oldKey, entry))
            }
            return gone
        }
        guard !evicted.isEmpty else { return }
        let urls = evicted.map { url($0.0, $0.1.format) }
        _ = try? await NIOThreadPool.singleton.runIfActive {
            for url in urls { try? FileManager.default.removeItem(at: url) }
        }
    }

    /// Builds the index from the directory once (the cache survives restarts).
    private func loadIfNeeded() async {
        guard !state.withLock({ $0.loaded }) else { return }
        let directory = directory
        let found =
            (try? await NIOThreadPool.singleton.runIfActive { () -> [(Key, Entry)] in
                Self.scan(directory)
            }) ?? []
        state.withLock { state in
            guard !state.loaded else { return }
            state.loaded = true
            for (key, entry) in found where state.entries[key] == nil {
                state.entries[key] = entry
                state.total += entry.size
            }
        }
    }

    private static func scan(_ directory: URL) -> [(Key, Entry)] {
        let manager = FileManager.default
        guard let shards = try? manager.contentsOfDirectory(atPath: directory.path) else { return [] }
        var found: [(Key, Entry)] = []
        for shard in shards where shard.count == 2 {
            let folder = directory.appendingPathComponent(shard)
            for name in (try? manager.contentsOfDirectory(atPath: folder.path)) ?? [] {
                let path = folder.appendingPathComponent(name).path
                if name.hasPrefix(".tmp-") {
                    // A write a crash interrupted.
                    try? manager.removeItem(atPath: path)
                    continue
                }
                guard let underscore = name.firstIndex(of: "_"), let dot = name.lastIndex(of: "."), underscore < dot,
                    let format = ImageFormat(rawValue: String(name[name.index(after: dot)...])),
                    let attributes = try? manager.attributesOfItem(atPath: path),
                    let size = (attributes[.size] as? NSNumber)?.int64Value
                else { continue }
                let key = Key(sha256: String(name[..<underscore]), request: String(name[name.index(after: underscore)..<dot]))
                found.append((key, Entry(size: size, used: attributes[.modificationDate] as? Date ?? .distantPast, format: format)))
            }
        }
        return found
    }
}
