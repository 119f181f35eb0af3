import Foundation
import IMCore

/// Which stored files the stored messages and conversations point at (docs/MEDIA.md, "Retention"): the
/// `media_refs` table, one row `(media_id, cid, message_id)` a reference; `message_id` is `""` for a
/// conversation's name and attributes (a group avatar `/media/<id>` URL, say). The stores write a message's
/// rows in the transaction that stores, edits or recalls it, so a file an acknowledged message names always
/// has its row, crash or not; rows go with their conversation (`ON DELETE CASCADE`). Retention collects only
/// files with no row.
///
/// A text names a file by `/media/<id>` (any host; JSON's `\/media\/<id>` too) or by `"objId": "<id>"` (a
/// typed file message's `_lcfile`, whether or not the server filled it). Finding them is one pass over the
/// bytes, no JSON parse: an ordinary text message costs a scan for `/` and `"` and nothing else.
enum MediaReferences {
    /// The distinct media ids `text` names, in order of appearance.
    static func ids(in text: String) -> [String] {
        var text = text
        return text.withUTF8 { ids(in: $0) }
    }

    /// The media ids a stored message names (none for a binary message).
    static func ids(in record: MessageRecord) -> [String] {
        record.binary ? [] : ids(in: record.data)
    }

    /// The media ids a conversation's name and attributes name.
    static func ids(name: String?, attr: JSONValue) -> [String] {
        var found = ids(in: attr.jsonString())
        for id in name.map(ids(in:)) ?? [] where !found.contains(id) { found.append(id) }
        return found
    }

    static func ids(in bytes: UnsafeBufferPointer<UInt8>) -> [String] {
        var found: [String] = []
        let count = bytes.count
        var i = 0
        while i < count {
            let byte = bytes[i]
            i += 1
            if byte == UInt8(ascii: "/") {
                // "/media/<id>", or with escaped slashes ("\/media\/<id>", or "\\\/" when escaped twice).
                guard matches(bytes, at: i, "media") else { continue }
                var j = i + 5
                while j < count, bytes[j] == UInt8(ascii: "\\") { j += 1 }
                guard j < count, bytes[j] == UInt8(ascii: "/") else { continue }
                if let (id, end) = id(bytes, at: j + 1) {
                    if !found.contains(id) { found.append(id) }
                    i = end
                }
            } else if byte == UInt8(ascii: "\"") {
                // "objId" <spaces> : <spaces> "<id>"
                guard matches(bytes, at: i, "objId\"") else { continue }
                var j = skipSpaces(bytes, i + 6)
                guard j < count, bytes[j] == UInt8(ascii: ":") else { continue }
                j = skipSpaces(bytes, j + 1)
                guard j < count, bytes[j] == UInt8(ascii: "\"") else { continue }
                if let (id, end) = id(bytes, at: j + 1), end < count, bytes[end] == UInt8(ascii: "\"") {
                    if !found.contains(id) { found.append(id) }
                    i = end + 1
                }
            }
        }
        return found
    }

    private static func matches(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int, _ word: StaticString) -> Bool {
        guard index + word.utf8CodeUnitCount <= bytes.count else { return false }
        let start = word.utf8Start
        for k in 0..<word.utf8CodeUnitCount where bytes[index + k] != start[k] { return false }
        return true
    }

    private static func skipSpaces(_ bytes: UnsafeBufferPointer<UInt8>, _ index: Int) -> Int {
        var j = index
        while j < bytes.count, bytes[j] == 0x20 || bytes[j] == 0x09 || bytes[j] == 0x0A || bytes[j] == 0x0D { j += 1 }
        return j
    }

    /// A media id (1–64 of `[A-Za-z0-9_-]`, as `MediaIDs.isValid`) starting at `index`, and where it ends.
    private static func id(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> (String, Int)? {
        var end = index
        while end < bytes.count, isIDByte(bytes[end]) { end += 1 }
        guard end > index, end - index <= 64 else { return nil }
        return (String(decoding: UnsafeBufferPointer(rebasing: bytes[index..<end]), as: UTF8.self), end)
    }

    private static func isIDByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == UInt8(ascii: "-")
            || b == UInt8(ascii: "_")
    }

    /// The `message_id` of a conversation's own references (its name and attributes).
    static let conversationSource = ""

    /// PostgreSQL regular expressions that find what `ids(in:)` finds, for backfilling stored rows in SQL.
    static let postgresPatterns = [
        #"/media\\*/([A-Za-z0-9_-]{1,64})(?![A-Za-z0-9_-])"#,
        #""objId"\s*:\s*"([A-Za-z0-9_-]{1,64})""#,
    ]
}
