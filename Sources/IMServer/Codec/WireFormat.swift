import Foundation
import HummingbirdWebSocket
import IMCore
import IMProto
import NIOCore

/// How a connection encodes commands, chosen by WebSocket subprotocol negotiation on `/ws`.
enum WireFormat: Sendable, Hashable {
    /// Hookbot's JSON protocol: one JSON object per text frame.
    case json
    /// LeanCloud's protobuf: one `GenericCommand` per binary frame.
    case protobuf
    /// LeanCloud's protobuf, base64-encoded in text frames.
    case protobufBase64
    /// An in-process client (`LocalEndpoint`): commands are handed over as values, never encoded.
    case local

    /// The subprotocols Hookbot speaks.
    static let subprotocols: [String: WireFormat] = [
        "lc.protobuf2.3": .protobuf,
        "lc.proto2base64.3": .protobufBase64,
        "lc.protobuf2.1": .protobuf,
        Self.jsonSubprotocol: .json,
    ]

    /// Hookbot's own subprotocol name for the JSON protocol (offering it is optional).
    static let jsonSubprotocol = "hookbot.json"

    /// Picks the first subprotocol the client offers (in its order) that Hookbot speaks. Without an
    /// offer, or when none is known, the connection uses JSON and no subprotocol is answered.
    static func negotiate(offered: [String]) -> (format: WireFormat, subprotocol: String?) {
        let names = offered.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        for name in names {
            if let format = subprotocols[name] { return (format, name) }
        }
        return (.json, nil)
    }
}

/// Turns WebSocket frames into commands and commands into frames for one connection's wire format.
struct FrameCodec: Sendable {
    let format: WireFormat
    private let json = JSONCommandCodec()
    private let protobuf = ProtobufCommandCodec()

    init(_ format: WireFormat) { self.format = format }

    /// The frame for a command. Commands the protobuf encoding does not carry (cmd messages and hook
    /// commands) give an empty frame, which the writer skips.
    func encode(_ command: Command) -> Connection.Outbound {
        switch format {
        case .json:
            return .text(json.encode(command))
        case .protobuf:
            guard let bytes = try? protobuf.encode(command) else { return .binary(ByteBuffer()) }
            return .binary(ByteBuffer(bytes: bytes))
        case .protobufBase64:
            guard let text = try? protobuf.encodeBase64(command) else { return .text("") }
            return .text(text)
        case .local:
            return .command(command)
        }
    }

    /// The commands of a received frame.
    func decode(_ message: WebSocketMessage) -> Result<[Command], CommandDecodingError> {
        switch (format, message) {
        case (.json, .text(let text)):
            return Result { () throws(CommandDecodingError) in [try json.decode(text)] }
        case (.json, .binary):
            return .failure(
                CommandDecodingError(
                    IMError(.malformedCommand, "binary frames need a protobuf subprotocol (lc.protobuf2.3)"), requestSerial: nil))
        case (.protobuf, .binary(let buffer)), (.protobufBase64, .binary(let buffer)):
            return Result { () throws(CommandDecodingError) in try protobuf.decode(Array(buffer.readableBytesView)) }
        case (.protobufBase64, .text(let text)):
            return Result { () throws(CommandDecodingError) in try protobuf.decodeBase64(text) }
        case (.local, _):
            return .failure(CommandDecodingError(IMError(.malformedCommand, "in-process connections carry no frames"), requestSerial: nil))
        case (.protobuf, .text):
            return .failure(
                CommandDecodingError(
                    IMError(
                        .malformedCommand, "text frames need the JSON protocol or lc.proto2base64.3; send GenericCommand in binary frames"),
                    requestSerial: nil))
        }
    }

    /// A frame of `encode` for a command without `peerId`, turned into the frame of the same command with
    /// `peerId` set, without encoding it again: on the protobuf formats the field (`GenericCommand` field 4,
    /// a string) is appended to the encoded message, which protobuf decoders read exactly as if it had been
    /// encoded in place. Nil for the other formats (they encode again).
    static func naming(_ frame: Connection.Outbound, format: WireFormat, peerID: String) -> Connection.Outbound? {
        func appended(_ bytes: some Collection<UInt8>) -> [UInt8] {
            var out = Array(bytes)
            let name = Array(peerID.utf8)
            out.append(0x22) // field 4, length-delimited
            var length = UInt(name.count)
            while length >= 0x80 {
                out.append(UInt8(length & 0x7F) | 0x80)
                length >>= 7
            }
            out.append(UInt8(length))
            out += name
            return out
        }
        switch (format, frame) {
        case (.protobuf, .binary(let buffer)) where buffer.readableBytes > 0:
            return .binary(ByteBuffer(bytes: appended(buffer.readableBytesView)))
        case (.protobufBase64, .text(let text)) where !text.isEmpty:
            guard let bytes = Data(base64Encoded: text) else { return nil }
            return .text(Data(appended(bytes)).base64EncodedString())
        default:
            return nil
        }
    }

    /// Whether a frame produced by `encode` is the empty "nothing to send" frame.
    static func isEmpty(_ frame: Connection.Outbound) -> Bool {
        switch frame {
        case .text(let text): text.isEmpty
        case .binary(let buffer), .framed(let buffer): buffer.readableBytes == 0
        case .command, .close: false
        }
    }
}
