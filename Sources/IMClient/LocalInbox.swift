import IMCore
import Synchronization

/// What an in-process server sent on a link, until the client's reading task takes it: everything that
/// arrived since its last look, in order, as one batch (so acks of messages that arrived together leave as
/// one `ack`, with no task of their own). The server appends from whatever thread it delivers on; the
/// reader, when it waits, is resumed once per burst. Unbounded as the `AsyncStream` it replaces: the server
/// bounds what it sends a connection (its outbound limits), not this queue.
final class LocalInbox: Sendable {
    private struct State {
        var commands: [Command] = []
        var reader: CheckedContinuation<[Command]?, Never>?
        var finished = false
    }

    private let state = Mutex(State())
    /// Finishes with the connection (`ended()` waits for it).
    private let end = AsyncStream<Never>.makeStream()

    /// A command the server sent (ignored after `finish`).
    func append(_ command: Command) {
        let reader = state.withLock { state -> CheckedContinuation<[Command]?, Never>? in
            guard !state.finished else { return nil }
            guard let reader = state.reader else {
                state.commands.append(command)
                return nil
            }
            state.reader = nil
            return reader
        }
        reader?.resume(returning: [command])
    }

    /// The connection ended: the reader gets what is left, then nil.
    func finish() {
        let reader = state.withLock { state in
            state.finished = true
            defer { state.reader = nil }
            return state.reader
        }
        reader?.resume(returning: nil)
        end.continuation.finish()
    }

    /// Everything received since the last call, waiting for the next command when there is none; nil once
    /// the connection has ended and everything was taken. One reader at a time.
    func next() async -> [Command]? {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [Command]?? in
                if !state.commands.isEmpty {
                    defer { state.commands = [] }
                    return .some(state.commands)
                }
                if state.finished { return .some(nil) }
                state.reader = continuation
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Returns once the connection has ended (one caller: the link's `closeAndWait`).
    func ended() async {
        for await _ in end.stream {}
    }
}
