import CoreMetrics
import Foundation
import IMCore
import Logging
import ServiceLifecycle

/// What a collection of unreferenced files removed (or, in a dry run, would remove).
public struct MediaCollection: Sendable, Equatable {
    /// The first `MediaRetention.listed` of the files, oldest first (a run's memory stays bounded).
    public var files: [MediaRetention.File] = []
    /// How many files.
    public var count = 0
    /// Their bytes: what their owners' quotas get back. Content another record still shares stays on disk.
    public var bytes: Int64 = 0
    /// Whether nothing was deleted (`hookbot media gc --dry-run`).
    public var dryRun: Bool
}

/// Retention of stored files (docs/MEDIA.md, "Retention"): a file no stored message and no conversation
/// references (`MediaReferences`) is deleted once it is older than the grace period (24 h by default: the
/// LeanCloud SDKs upload first and send the message afterwards). Run by `hookbot media gc` and by the server
/// every `MediaConfiguration.retentionInterval`.
public enum MediaRetention {
    /// One stored file as retention sees it.
    public struct File: Sendable, Equatable {
        public var id: String
        public var owner: String
        public var name: String
        public var size: Int64
        /// Milliseconds since 1970.
        public var createdAt: Int64
    }

    /// Where a listing continues (files are listed by creation time, then id).
    struct Cursor: Sendable {
        var createdAt: Int64
        var id: String
    }

    /// Files listed per query.
    static let page = 500
    /// Files a `MediaCollection` lists (it counts them all).
    public static let listed = 1000

    /// Deletes (with `dryRun`, only lists) the files older than `grace` at `now` (milliseconds since 1970)
    /// that nothing references, through `media.delete` (content goes with its last record), and tells `each`
    /// of every one. Each file is checked once more just before it goes, so a message that names it
    /// meanwhile keeps it.
    static func collect(
        store: any ServerStore, media: any MediaStore, grace: Duration, now: Int64, dryRun: Bool, page: Int = page,
        each: (File) -> Void = { _ in }
    ) async throws -> MediaCollection {
        guard let queries = store as? any MediaRetentionQueries else {
            throw MediaError(.unavailable, "this storage backend keeps no media records")
        }
        let graceMillis = max(0, grace.components.seconds * 1000 + grace.components.attoseconds / 1_000_000_000_000_000)
        let cutoff = now - graceMillis
        var result = MediaCollection(dryRun: dryRun)
        var cursor: Cursor?
        while true {
            let files = try await queries.unreferencedMedia(createdAtOrBefore: cutoff, after: cursor, limit: page)
            for file in files {
                if !dryRun {
                    guard try await !queries.isMediaReferenced(file.id), try await media.delete(file.id) else { continue }
                }
                if result.files.count < listed { result.files.append(file) }
                result.count += 1
                result.bytes += file.size
                each(file)
            }
            guard files.count == page, let last = files.last else { break }
            cursor = Cursor(createdAt: last.createdAt, id: last.id)
        }
        return result
    }

    /// Opens the store `configuration` names (migrating it as a server would), collects, and closes it: what
    /// `hookbot media gc` runs, beside a running server or not. `each` hears of every file as it goes.
    public static func collect(
        _ configuration: ServerConfiguration, grace: Duration? = nil, dryRun: Bool, logger: Logger,
        each: (File) -> Void = { _ in }
    ) async throws -> MediaCollection {
        let store = try IMService.openStore(configuration, logger: logger)
        do {
            if let postgres = store as? PostgresStore { try await postgres.migrate() }
            guard let media = try MediaStores.open(configuration, store: store) else {
                throw MediaError(.unavailable, "this storage backend keeps no media records")
            }
            let result = try await collect(
                store: store, media: media, grace: grace ?? configuration.media.retentionGrace, now: Identifiers.nowMillis(),
                dryRun: dryRun, each: each)
            await store.shutdown()
            return result
        } catch {
            await store.shutdown()
            throw error
        }
    }
}

/// The two queries retention needs from a store that keeps media records.
protocol MediaRetentionQueries: Sendable {
    /// Files created at or before `cutoff` with no reference, after `after` in (created_at, id) order.
    func unreferencedMedia(createdAtOrBefore cutoff: Int64, after: MediaRetention.Cursor?, limit: Int) async throws -> [MediaRetention.File]
    func isMediaReferenced(_ id: String) async throws -> Bool
    /// The conversations whose messages or attributes name the file (for managers' deletes).
    func conversationsNamingMedia(_ id: String) async throws -> [String]
}

extension IMServer {
    /// Collects the unreferenced files older than `grace` (the configured one by default) at `now`, counts
    /// them in `hookbot_media_gc_files_total` / `hookbot_media_gc_bytes_total`, and answers what went.
    public func collectUnreferencedMedia(grace: Duration? = nil, now: Int64? = nil, dryRun: Bool = false) async throws
        -> MediaCollection
    {
        guard let media else { throw MediaError(.unavailable, "this storage backend keeps no media records") }
        let result = try await MediaRetention.collect(
            store: service.store, media: media, grace: grace ?? configuration.media.retentionGrace, now: now ?? Identifiers.nowMillis(),
            dryRun: dryRun)
        if !dryRun {
            Counter(label: "hookbot_media_gc_runs_total", factory: telemetry.factory).increment()
            Counter(label: "hookbot_media_gc_files_total", factory: telemetry.factory).increment(by: result.count)
            Counter(label: "hookbot_media_gc_bytes_total", factory: telemetry.factory).increment(by: Int(result.bytes))
        }
        return result
    }

    /// The periodic collection, a service of the server's group (none when the interval is zero or the store
    /// keeps no media).
    var mediaRetention: [any Service] {
        guard media != nil, configuration.media.retentionInterval > .zero else { return [] }
        return [MediaRetentionService(server: self, interval: configuration.media.retentionInterval, logger: service.logger)]
    }
}

/// Runs `IMServer.collectUnreferencedMedia` every interval until the server shuts down; logs what went.
struct MediaRetentionService: Service {
    let server: IMServer
    let interval: Duration
    let logger: Logger

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                do {
                    let result = try await server.collectUnreferencedMedia()
                    let level: Logger.Level = result.count == 0 ? .debug : .info
                    logger.log(
                        level: level, "media gc: removed unreferenced files",
                        metadata: ["files": "\(result.count)", "bytes": "\(result.bytes)"])
                } catch {
                    logger.warning("media gc failed", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
