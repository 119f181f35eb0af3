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
                loop.execute { WebSocketSession.Writer.write(items) }
            }
        }
    }
}
