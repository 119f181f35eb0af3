import NIOCore

/// Frames for many WebSocket sessions, collected while a fan-out (or a committed batch) is sent, then
/// written with one event-loop task per event loop and one flush per session, instead of a task and a
/// flush (a `writev`) per frame. Frames keep their order per session. Not `Sendable`: one thread fills it
/// and calls `send`.
///
/// Written here because NIO batches writes only within a channel; across channels of a loop the caller
/// has to group them.
final class Outbox {
    private var loops: [(loop: any EventLoop, items: [(WebSocketSession.Writer, Connection.Outbound)])] = []

    /// Queues `frame` for `writer`'s session (the transport counted it already).
    func add(_ frame: Connection.Outbound, for writer: WebSocketSession.Writer) {
        let loop = writer.channel.eventLoop
        if let index = loops.firstIndex(where: { $0.loop === loop }) {
            loops[index].items.append((writer, frame))
        } else {
            loops.append((loop, [(writer, frame)]))
        }
    }

    /// Hands every queued frame to its event loop; the outbox is empty again.
    func send() {
        let loops = loops
        self.loops = []
        for (loop, items) in loops {
            if loop.inEventLoop {
                WebSocketSession.Writer.write(items)
            } else {
                let items = Self.withFramesOfTheirOwn(items)
                loop.execute { WebSocketSession.Writer.write(items) }
            }
        }
    }

    /// `items` with each shared frame buffer replaced by a copy for this event loop (one per run of items
    /// that share it: a message's frame for its receivers). Every socket write retains and releases its
    /// buffer; with one buffer for all receivers, the event loops and the thread that queued the frames take
    /// turns at its reference count's cache line.
    private static func withFramesOfTheirOwn(
        _ items: [(WebSocketSession.Writer, Connection.Outbound)]
    ) -> [(WebSocketSession.Writer, Connection.Outbound)] {
        var items = items
        var last: (original: UnsafeRawPointer?, copy: ByteBuffer)?
        for index in items.indices {
            guard case .framed(let buffer) = items[index].1 else { continue }
            let original = buffer.withUnsafeReadableBytes { UnsafeRawPointer($0.baseAddress) }
            if let last, last.original == original {
                items[index].1 = .framed(last.copy)
                continue
            }
            var copy = items[index].0.channel.allocator.buffer(capacity: buffer.readableBytes)
            copy.writeImmutableBuffer(buffer)
            last = (original, copy)
            items[index].1 = .framed(copy)
        }
        return items
    }
}
