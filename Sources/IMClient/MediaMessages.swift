import Foundation
import IMCore

/// Image, audio, video and file messages from local files: upload, then send.
extension IMConversation {
    /// Uploads the file at `file` and sends it as an image, audio, video or file message — by the type the
    /// server sniffed from its bytes unless `type` says otherwise — carrying LeanCloud's `_lcfile`
    /// (`objId`, `url`, `metaData` with the server's `name`, `format`, `size`, `width`, `height`,
    /// `duration`). `text` is an optional caption. `progress` reports the upload. Returns the sent message.
    @discardableResult
    public func sendFile(
        at file: URL, name: String? = nil, text: String? = nil, attributes: [String: JSONValue]? = nil,
        as type: MessageType? = nil, options: IMSendOptions = .default,
        progress: (@Sendable (IMTransferProgress) -> Void)? = nil
    ) async throws(IMError) -> IMMessage {
        let stored = try await client.upload(fileAt: file, name: name, progress: progress)
        return try await send(file: stored, text: text, attributes: attributes, as: type, options: options)
    }

    /// Sends a file already uploaded (`IMClient.upload`) as an image, audio, video or file message.
    @discardableResult
    public func send(
        file: IMMediaFile, text: String? = nil, attributes: [String: JSONValue]? = nil, as type: MessageType? = nil,
        options: IMSendOptions = .default
    ) async throws(IMError) -> IMMessage {
        let kind = type ?? file.messageType
        guard [.image, .audio, .video, .file].contains(kind) else {
            throw IMError(.invalidArgument, "a file goes in an image, audio, video or file message, not \(kind.name)")
        }
        let typed = TypedMessage(type: kind.rawValue, text: text, attributes: attributes, file: file.fileInfo)
        return try await send(.typed(typed), options: options)
    }
}
