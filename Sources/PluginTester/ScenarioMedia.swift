import Foundation
import HookRuntime
import IMCore

/// The files of a scenario, as a running bot's media store would answer for them (`msg.file`'s record,
/// `ctx.media`).
struct ScenarioMedia: HookMediaSource {
    var files: [String: Scenario.ScenarioFile]

    func record(id: String) async throws -> HookMediaRecord? { files[id]?.record }

    func read(id: String, maxBytes: Int) async throws -> [UInt8] {
        guard let file = files[id] else { throw HookMediaError("no stored file \(id)") }
        guard let content = file.content else {
            throw HookMediaError("the scenario gives no content for file \(id) (files[\"\(id)\"].content)")
        }
        return Array(content.prefix(maxBytes))
    }

    /// `file` as the server leaves it in a message: when its id names a stored file, url and metaData
    /// (name, format, size, width, height, duration) are the record's, whatever the sender claimed;
    /// anything else is left as sent.
    func filled(_ file: FileInfo) -> FileInfo {
        guard let id = file.objId, let record = files[id]?.record else { return file }
        return FileInfo(
            url: record.url ?? "", objId: id, name: record.name, format: record.metadata.format, size: record.metadata.size,
            width: record.metadata.width, height: record.metadata.height, duration: record.metadata.duration)
    }
}
