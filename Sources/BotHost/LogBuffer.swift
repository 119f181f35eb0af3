import Foundation
import Logging
import Synchronization

/// The last log entries of a bot host, for the console's live log: a ring of `capacity` entries, each
/// with a sequence number so a reader can ask for what came after the last one it saw.
public final class LogBuffer: Sendable {
    /// One log entry.
    public struct Entry: Sendable, Hashable {
        public var seq: Int
        /// Seconds since 1970.
        public var time: Double
        public var level: Logger.Level
        public var message: String
        /// The `plugin` metadata value, when the entry is about a plugin.
        public var plugin: String?
        public var metadata: [String: String]
    }

    private struct Ring {
        var entries: [Entry] = []
        var start = 0
        var nextSeq = 1
    }

    public let capacity: Int
    private let ring = Mutex(Ring())

    public init(capacity: Int = 2000) {
        self.capacity = max(1, capacity)
    }

    /// Appends an entry (the oldest goes once `capacity` are held).
    public func append(level: Logger.Level, message: String, metadata: [String: String], time: Double = Date().timeIntervalSince1970) {
        ring.withLock { ring in
            let entry = Entry(
                seq: ring.nextSeq, time: time, level: level, message: message, plugin: metadata["plugin"],
                metadata: metadata.filter { $0.key != "plugin" })
            ring.nextSeq += 1
            if ring.entries.count < capacity {
                ring.entries.append(entry)
            } else {
                ring.entries[ring.start] = entry
                ring.start = (ring.start + 1) % capacity
            }
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
            let count = ring.entries.count
            for offset in 0..<count {
                let entry = ring.entries[(ring.start + offset) % count]
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
