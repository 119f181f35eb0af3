import Foundation
import HummingbirdWSClient
import IMCore
import Logging
import Synchronization

/// One WebSocket connection to the server. Frames queued with `send` leave in order; received frames
/// arrive on `inbound`, which finishes when the connection ends for any reason.
final class Link: Sendable {
    /// A received text frame.
    enum Frame: Sendable {
        case command(Command)
        /// A frame that does not decode to a `Command` (for example a `cmd` this SDK does not know).
        case undecodable(String)
    }

    /// Identifies the link in the client's bookkeeping.
    let id: Int
    let inbound: AsyncStream<Frame>
    private let outbound: AsyncStream<String>.Continuation
    private let task: Mutex<Task<Void, Never>?>
    private let codec = JSONCommandCodec()

    private init(id: Int, inbound: AsyncStream<Frame>, outbound: AsyncStream<String>.Continuation) {
        self.id = id
        self.inbound = inbound
        self.outbound = outbound
        task = Mutex(nil)
    }

    /// Opens a WebSocket to `url`. Throws when the connection is not established within `timeout`.
    static func connect(id: Int, url: String, timeout: Duration, pingInterval: Duration?, maxFrameSize: Int,
                        logger: Logger) async throws(IMError) -> Link {
        let (frames, outbound) = AsyncStream<String>.makeStream()
        let (inbound, inboundContinuation) = AsyncStream<Frame>.makeStream()
        let (ready, readyContinuation) = AsyncStream<Bool>.makeStream()
        let link = Link(id: id, inbound: inbound, outbound: outbound)
        let configuration = WebSocketClientConfiguration(
            maxFrameSize: maxFrameSize, autoPing: pingInterval.map { .enabled(timePeriod: $0) } ?? .disabled)
        let codec = JSONCommandCodec()
        let task = Task {
            do {
                try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
                    readyContinuation.yield(true)
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await frame in frames { try await outbound.write(.text(frame)) }
                            try await outbound.close(.normalClosure, reason: nil)
                        }
                        for try await message in inbound.messages(maxSize: maxFrameSize) {
                            guard case .text(let text) = message else { continue }
                            if let command = try? codec.decode(text) {
                                inboundContinuation.yield(.command(command))
                            } else {
                                inboundContinuation.yield(.undecodable(text))
                            }
                        }
                        group.cancelAll()
                    }
                }
            } catch {
                logger.debug("connection ended", metadata: ["error": "\(error)"])
            }
            readyContinuation.finish()
            inboundContinuation.finish()
            outbound.finish()
        }
        link.task.withLock { $0 = task }
        let timer = Task {
            try await Task.sleep(for: timeout)
            readyContinuation.finish()
        }
        defer { timer.cancel() }
        for await _ in ready { return link }
        task.cancel()
        link.close()
        throw IMError(.connectionFailed, "could not connect to \(url)")
    }

    /// Queues a command for sending.
    func send(_ command: Command) {
        outbound.yield(codec.encode(command))
    }

    /// Closes the connection after the frames already queued; `inbound` then finishes.
    func close() {
        outbound.finish()
    }

    /// Closes the connection and waits until it has ended, at most `timeout` (then drops it).
    func closeAndWait(timeout: Duration) async {
        outbound.finish()
        guard let task = task.withLock({ $0 }) else { return }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { task.cancel() }
        }
        await task.value
        timer.cancel()
    }

    /// Drops the connection at once.
    func abort() {
        outbound.finish()
        task.withLock { $0 }?.cancel()
    }
}
