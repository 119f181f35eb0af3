import Foundation
import HookRuntime
import Logging
import NIOCore
import Synchronization

/// The last log entries of a bot host, for the console's live log: a ring of at most `capacity` entries
/// and `maxBytes` of text, each with a sequence number so a reader can ask for what came after the last one
/// it saw. An entry's message is cut to `StoredText.maxLogEntryBytes` and each metadata value to
/// `maxMetadataValueBytes` (marked with how many bytes were dropped), so what a plugin logs cannot grow the
/// host's memory: the ring holds at most about `maxBytes`, whatever is logged.
public final class LogBuffer: Sendable {
    /// One log entry (the console's `GET /api/logs` encodes it as it is).
    public struct Entry: Sendable, Hashable, Encodable {
        public var seq: Int
        /// Seconds since 1970.
        public var time: Double
        public var level: Logger.Level
        public var message: String
        /// The `plugin` metadata value, when the entry is about a plugin.
        public var plugin: String?
        public var metadata: [String: String]

        /// The bytes of text the entry holds (what `maxBytes` counts), plus a fixed overhead.
        var bytes: Int {
            message.utf8.count + (plugin?.utf8.count ?? 0) + metadata.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count } + 64
        }
    }

    private struct Ring {
        var entries = CircularBuffer<Entry>()
        var bytes = 0
        var nextSeq = 1
    }

    /// A metadata value's cap.
    public static let maxMetadataValueBytes = 1024
    /// Metadata entries kept per log entry (the rest are dropped).
    public static let maxMetadataCount = 16

    public let capacity: Int
    /// The most text the ring holds: the oldest entries go to make room.
    public let maxBytes: Int
    private let ring = Mutex(Ring())

    public init(capacity: Int = 2000, maxBytes: Int = 2 << 20) {
        self.capacity = max(1, capacity)
        self.maxBytes = max(StoredText.maxLogEntryBytes * 4, maxBytes)
    }

    /// The text the ring holds now, in bytes (at most `maxBytes`).
    public var bytes: Int { ring.withLock { $0.bytes } }

    /// Appends an entry, its message and metadata cut to their caps; the oldest go once `capacity` entries
    /// or `maxBytes` would be passed.
    public func append(level: Logger.Level, message: String, metadata: [String: String], time: Double = Date().timeIntervalSince1970) {
        var kept: [String: String] = [:]
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) where key != "plugin" && kept.count < Self.maxMetadataCount {
            kept[StoredText.cut(key, to: 64)] = StoredText.cut(value, to: Self.maxMetadataValueBytes)
        }
        let plugin = metadata["plugin"].map { StoredText.cut($0, to: 256) }
        let message = StoredText.cut(message, to: StoredText.maxLogEntryBytes)
        ring.withLock { ring in
            let entry = Entry(seq: ring.nextSeq, time: time, level: level, message: message, plugin: plugin, metadata: kept)
            let size = entry.bytes
            ring.nextSeq += 1
            while let oldest = ring.entries.first, ring.entries.count >= capacity || ring.bytes + size > maxBytes {
                ring.bytes -= oldest.bytes
                ring.entries.removeFirst()
            }
            ring.entries.append(entry)
            ring.bytes += size
        }
    }

    /// Entries after sequence number `after`, at `level` or above, of `plugin` if given, oldest first, at
    /// most `limit`; and the sequence number to ask after next time.
    public func entries(
        after: Int = 0, minimumLevel: Logger.Level = .trace, plugin: String? = nil,
        limit: Int = 200
    ) -> (entries: [Entry], next: Int) {
        ring.withLock { ring in
            var out: [Entry] = []
            var next = after
            for entry in ring.entries {
                guard entry.seq > after else { continue }
                next = entry.seq
                guard entry.level >= minimumLevel, plugin == nil || entry.plugin == plugin else { continue }
                out.append(entry)
                if out.count >= limit { break }
            }
            return (out, max(next, after))
        }
    }
}

/// A swift-log handler that writes into a `LogBuffer` (combine it with the terminal's handler through
/// `MultiplexLogHandler`).
public struct LogBufferHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let buffer: LogBuffer

    public init(buffer: LogBuffer, level: Logger.Level = .info) {
        self.buffer = buffer
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        buffer.append(
            level: event.level, message: "\(event.message)",
            metadata: merged.mapValues { "\($0)" })
    }
}
