import Foundation
import IMCore

/// LeanCloud's typed messages that carry a file (image −2, audio −3, video −4, file −6): the JSON text has
/// `_lctype` and `_lcfile {objId, url, metaData}`. When `objId` names a file in this server's store, the
/// server writes `url` and `metaData` (name, format, size, width, height, duration) from its record before
/// the message is reviewed and stored, so every receiver sees what the server computed, not the sender's
/// word. Anything else (no `_lcfile` in the text, not JSON, not a file type, no or an unknown `objId`) is
/// left exactly as sent.
enum FileMessageFill {
    /// The `_lctype`s whose `_lcfile` names a file.
    static let fileTypes: Set<Int> = [-2, -3, -4, -6]

    /// How much longer than `ServerConfiguration.maxMessageBytes` a filled message may be. The limit is checked
    /// on what the sender sent; the fill then writes the server's url (up to a 512-byte public URL, a signature
    /// and a percent-encoded name of at most 200 bytes) and metaData, at most about 1.5 KiB more than the
    /// sender's own. A filled message within the limit plus this headroom is accepted; a longer one (which the
    /// fill cannot make from a message within the limit, but a later change could) is refused with 4109 rather
    /// than stored larger than receivers were promised.
    static let headroomBytes = 4096

    /// The key whose presence in a message's text makes it worth parsing.
    private static let fileKey = Array("\"_lcfile\"".utf8)

    /// Whether `text` holds `fileKey`, searched in the string's UTF-8 bytes. Written out because both ready searches
    /// cost a few % of a thread per message here (issue 30): Foundation's `String.contains` goes through NSString's
    /// search, and the standard library's `firstRange(of:)` on a UTF-8 view builds a Z-array per call (glibc's
    /// `memmem` is not visible to Swift).
    static func mentionsFile(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            fileKey.withUnsafeBufferPointer { key in
                guard let base = bytes.baseAddress, let keyBase = key.baseAddress, let first = key.first, bytes.count >= key.count else {
                    return false
                }
                for start in 0...(bytes.count - key.count) where bytes[start] == first {
                    if memcmp(base + start, keyBase, key.count) == 0 { return true }
                }
                return false
            }
        }
    }

    /// `text` with `_lcfile` filled from the record its `objId` names, or, for a URL-only file (no `objId`), with
    /// the `objId` of the external file record of that URL (`ExternalFiles`); nil when the message is left as is.
    /// Throws 4109 (`frameTooLong`) when the filled text passes `maxMessageBytes` plus `headroomBytes`.
    static func filled(
        _ text: String, sender: String, media: any MediaStore, external: (any ExternalFileTable)?, urls: MediaURLs, maxMessageBytes: Int
    ) async throws -> String? {
        // Ordinary text messages cost one search of their UTF-8 bytes, no parse.
        guard text.utf8.first == UInt8(ascii: "{"), mentionsFile(text) else { return nil }
        guard case .object(var message) = JSONValue.parse(text), let type = message["_lctype"]?.intValue,
            fileTypes.contains(type), case .object(var file) = message["_lcfile"]
        else { return nil }
        switch file["objId"] {
        case .string(let objID):
            guard MediaIDs.isValid(objID), let record = try await media.record(objID) else { return nil }
            fill(&file, from: record, urls: urls)
        case nil, .null?:
            // A file kept elsewhere: an objId for its URL, so the typed-messages plugin can read it.
            guard let external, case .string(let given) = file["url"], let url = ExternalFiles.acceptable(given) else { return nil }
            let name = ExternalFiles.name(given: file["metaData"]?["name"]?.stringValue, url: url)
            file["objId"] = .string(try await external.record(owner: sender, url: url, name: name, mime: nil).id)
        default:
            return nil
        }
        message["_lcfile"] = .object(file)
        let filled = JSONValue.object(message).jsonString()
        let limit = maxMessageBytes + headroomBytes
        guard filled.utf8.count <= limit else {
            throw IMError(
                .frameTooLong,
                "the file message is \(filled.utf8.count) bytes once the server's url and metaData are written; the limit is \(limit)")
        }
        return filled
    }

    /// `url` and `metaData` from the stored file's record.
    private static func fill(_ file: inout [String: JSONValue], from record: MediaRecord, urls: MediaURLs) {
        // Never the sender's host: the server's public URL or listening address (MediaURLs).
        file["url"] = .string(urls.messageURL(id: record.id, name: record.name))
        var meta: [String: JSONValue] = [:]
        if case .object(let given) = file["metaData"] { meta = given }
        let m = record.metadata
        meta["name"] = .string(record.name)
        // The uploader, as `GET /1.1/files` answers it ("unknown" for the operator or the app key, as LeanCloud's
        // storage SDK writes when no user is logged in): never the sender's claim.
        meta["owner"] = .string(record.owner.isEmpty ? "unknown" : record.owner)
        meta["size"] = .int(Int(m.size))
        meta["format"] = m.format.map { .string($0) }
        meta["width"] = m.width.map { .int($0) }
        meta["height"] = m.height.map { .int($0) }
        meta["duration"] = m.duration.map { .double($0) }
        file["metaData"] = .object(meta)
    }
}

extension IMService {
    /// `text` filled as `FileMessageFill.filled` does with this server's store and URLs; nil when left as is.
    func filledFileMessage(_ text: String, from sender: String) async throws -> String? {
        guard let media else { return nil }
        return try await FileMessageFill.filled(
            text, sender: sender, media: media, external: ExternalFiles.table(store), urls: mediaURLs,
            maxMessageBytes: configuration.maxMessageBytes)
    }
}
