import Foundation

/// Encodes and decodes commands as JSON text frames.
public struct JSONCommandCodec: Sendable {
    public init() {}

    /// Decodes one frame. Throws an `IMError` (4901 malformed, 4902 unknown cmd/op) carrying, in
    /// `requestSerial`, the request's `i` when it could be read, so that the error can be answered.
    public func decode(_ text: String) throws(CommandDecodingError) -> Command {
        let data = Data(text.utf8)
        do {
            return try JSONDecoder().decode(Command.self, from: data)
        } catch {
            throw Self.diagnose(data, error)
        }
    }

    public func encode(_ command: Command) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        guard let data = try? encoder.encode(command) else {
            return #"{"cmd":"error","code":4200,"reason":"INTERNAL_ERROR"}"#
        }
        return String(decoding: data, as: UTF8.self)
    }

    private struct Envelope: Decodable {
        var cmd: String?
        var op: String?
        var i: Int?
    }

    private static func diagnose(_ data: Data, _ underlying: any Error) -> CommandDecodingError {
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: data) else {
            return CommandDecodingError(error: IMError(.malformedCommand, "frame is not a JSON object"), requestSerial: nil)
        }
        let serial = envelope.i
        guard let cmd = envelope.cmd else {
            return CommandDecodingError(error: IMError(.malformedCommand, "missing field 'cmd'"), requestSerial: serial)
        }
        if CommandType(rawValue: cmd) == nil {
            return CommandDecodingError(error: IMError(.unknownCommand, "unknown cmd '\(cmd)'"), requestSerial: serial)
        }
        if let op = envelope.op, OpType(rawValue: op) == nil {
            return CommandDecodingError(error: IMError(.unknownCommand, "unknown op '\(op)'"), requestSerial: serial)
        }
        return CommandDecodingError(error: IMError(.malformedCommand, Self.describe(underlying)), requestSerial: serial)
    }

    private static func describe(_ error: any Error) -> String {
        guard let decoding = error as? DecodingError else { return "invalid command" }
        switch decoding {
        case .typeMismatch(_, let ctx), .valueNotFound(_, let ctx), .keyNotFound(_, let ctx), .dataCorrupted(let ctx):
            let path = ctx.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
            return path.isEmpty ? "invalid command" : "invalid value for field '\(path)'"
        @unknown default:
            return "invalid command"
        }
    }
}

/// A frame that could not be decoded, with the request serial when it was readable.
public struct CommandDecodingError: Error, Sendable {
    public var error: IMError
    public var requestSerial: Int?
}
