import NIOCore
import NIOWebSocket

/// A whole WebSocket frame as the server sends it (RFC 6455 section 5.2: FIN and opcode, the unmasked
/// payload length, the payload) in one buffer, written to the socket below NIO's frame encoder.
///
/// Written by hand because NIO's `WebSocketFrameEncoder` is only a channel handler: it writes each frame's
/// header into a buffer of its own (a copy-on-write allocation per frame while the last one is still
/// queued) and queues it as a second write, once per receiver. A server's frames are not masked, so one
/// message's frame is the same bytes for every receiver of its wire format: a fan-out builds it once and
/// every socket writes the same buffer.
enum ServerFrame {
    /// Header bytes before a payload of `length` bytes.
    static func headerLength(payload length: Int) -> Int {
        switch length {
        case ...125: 2
        case ...0xFFFF: 4
        default: 10
        }
    }

    /// Writes the header of a final, unmasked frame with `opcode` and a payload of `length` bytes.
    static func writeHeader(opcode: WebSocketOpcode, payload length: Int, into buffer: inout ByteBuffer) {
        buffer.writeInteger(0x80 | UInt8(webSocketOpcode: opcode)) // FIN: every frame of ours is whole
        switch length {
        case ...125:
            buffer.writeInteger(UInt8(length))
        case ...0xFFFF:
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(length))
        default:
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(length))
        }
    }

    /// The frame of a text or binary payload already in a buffer.
    static func frame(_ opcode: WebSocketOpcode, payload: ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer
    {
        var payload = payload
        return frame(opcode, length: payload.readableBytes, allocator: allocator) { $0.writeBuffer(&payload) }
    }

    /// The frame of a text payload.
    static func frame(text: String, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        frame(.text, length: text.utf8.count, allocator: allocator) { $0.writeString(text) }
    }

    /// One buffer of exactly the frame's size: the header, then the `length` bytes `writePayload` writes.
    private static func frame(
        _ opcode: WebSocketOpcode, length: Int, allocator: ByteBufferAllocator, writePayload: (inout ByteBuffer) -> Void
    ) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: headerLength(payload: length) + length)
        writeHeader(opcode: opcode, payload: length, into: &buffer)
        writePayload(&buffer)
        return buffer
    }
}
