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

    /// `text` with `_lcfile` filled from the record its `objId` names, or nil when the message is left as is.
    static func filled(_ text: String, media: any MediaStore) async throws -> String? {
        // Ordinary text messages cost one substring search, no parse.
        guard text.utf8.first == UInt8(ascii: "{"), text.contains("\"_lcfile\"") else { return nil }
        guard case .object(var message) = JSONValue.parse(text), let type = message["_lctype"]?.intValue,
            fileTypes.contains(type), case .object(var file) = message["_lcfile"], case .string(let objID) = file["objId"],
            MediaIDs.isValid(objID), let record = try await media.record(objID)
        else { return nil }
        file["url"] = .string(url(record, given: file["url"]))
        var meta: [String: JSONValue] = [:]
        if case .object(let given) = file["metaData"] { meta = given }
        let m = record.metadata
        meta["name"] = .string(record.name)
        meta["size"] = .int(Int(m.size))
        meta["format"] = m.format.map { .string($0) }
        meta["width"] = m.width.map { .int($0) }
        meta["height"] = m.height.map { .int($0) }
        meta["duration"] = m.duration.map { .double($0) }
        file["metaData"] = .object(meta)
        message["_lcfile"] = .object(file)
        return JSONValue.object(message).jsonString()
    }

    /// The file's URL: its download path `/media/<id>/<name>`. The server does not know the address its
    /// clients reach it by, so an absolute http(s) URL the sender gave keeps its scheme and host (the
    /// upload answers gave it so) and gets the server's path; anything else becomes the bare path.
    static func url(_ record: MediaRecord, given: JSONValue?) -> String {
        let path = MediaRoute.url(record)
        guard case .string(let text) = given, let components = URLComponents(string: text),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https", let host = components.host,
            !host.isEmpty, components.user == nil, components.password == nil
        else { return path }
        var origin = components
        origin.percentEncodedPath = ""
        origin.query = nil
        origin.fragment = nil
        guard let base = origin.string else { return path }
        return base + path
    }
}
