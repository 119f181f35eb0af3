/// Encodes and decodes commands as JSON text frames, with the hand-written codec in `JSON/`
/// (no Foundation, no Codable).
public struct JSONCommandCodec: Sendable {
    public init() {}

    /// Decodes one frame. Throws an `IMError` (4901 malformed, 4902 unknown cmd/op) carrying, in
    /// `requestSerial`, the request's `i` when it could be read, so that the error can be answered.
    public func decode(_ text: String) throws(CommandDecodingError) -> Command {
        var text = text
        return try text.withUTF8(Self.decodeResult).get()
    }

    /// Decodes one frame from its UTF-8 bytes.
    public func decode(bytes: UnsafeRawBufferPointer) throws(CommandDecodingError) -> Command {
        var command = Command(cmd: .session)
        let buffer = UnsafeBufferPointer(start: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        if let error = Command.decodeJSON(buffer, into: &command) { throw error }
        return command
    }

    /// Decodes one frame from its UTF-8 bytes (`[UInt8]`, `Data`, a buffer's readable bytes…).
    public func decode<Bytes: Collection<UInt8>>(bytes: Bytes) throws(CommandDecodingError) -> Command {
        if let result = bytes.withContiguousStorageIfAvailable(Self.decodeResult) { return try result.get() }
        return try Array(bytes).withUnsafeBufferPointer(Self.decodeResult).get()
    }

    // A closure capturing the command `inout` would make it a heap box, copied out at the end.
    private static func decodeResult(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<Command, CommandDecodingError> {
        var command = Command(cmd: .session)
        if let error = Command.decodeJSON(bytes, into: &command) { return .failure(error) }
        return .success(command)
    }

    public func encode(_ command: Command) -> String {
        JSONOutput.with { output in
            command.writeJSON(into: &output)
            return String(decoding: output.bytes, as: UTF8.self)
        }
    }

    /// Appends the command's JSON text to `buffer`.
    public func encode(_ command: Command, into buffer: inout [UInt8]) {
        JSONOutput.with { output in
            command.writeJSON(into: &output)
            buffer.append(contentsOf: output.bytes)
        }
    }
}

/// A frame that could not be decoded, with the request serial when it was readable.
public struct CommandDecodingError: Error, Sendable {
    public var error: IMError
    public var requestSerial: Int?
}
