import Foundation
import HookRuntime
import IMServer
import NIOCore

/// What the embedded bot sees of the files stored on its server (`msg.file`'s record, `ctx.media`): the
/// server's own media store, asked directly (no HTTP), within the time the runtime allows each look.
struct EmbeddedMedia: HookMediaSource {
    let store: any MediaStore

    func record(id: String) async throws -> HookMediaRecord? {
        guard MediaIDs.isValid(id), let record = try await store.record(id) else { return nil }
        return Self.record(record)
    }

    /// A record without content (no SHA-256: a file kept elsewhere) is no stored file.
    static func record(_ record: MediaRecord) -> HookMediaRecord? {
        guard record.metadata.sha256.count == 64 else { return nil }
        let name = record.name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#")))
        return HookMediaRecord(id: record.id, url: "/media/\(record.id)/\(name ?? "file")", name: record.name, metadata: record.metadata)
    }

    func read(id: String, maxBytes: Int) async throws -> [UInt8] {
        guard MediaIDs.isValid(id), let record = try await store.record(id), record.metadata.sha256.count == 64 else {
            throw HookMediaError("no stored file \(id)")
        }
        let wanted = Int64(min(Int64(maxBytes), record.metadata.size))
        guard wanted > 0 else { return [] }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(wanted))
        for try await chunk in store.read(record, range: 0..<wanted) {
            try Task.checkCancellation()
            bytes += chunk.readableBytesView.prefix(Int(wanted) - bytes.count)
            if bytes.count >= wanted { break }
        }
        return bytes
    }
}
