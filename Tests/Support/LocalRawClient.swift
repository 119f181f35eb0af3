import Foundation
import IMCore
import Synchronization

/// A raw client attached in process (`LocalEndpoint`): commands cross as values, and what the server sends
/// arrives in `inbox` with the thread it was sent on, so that a test can see where the server did its work (an
/// in-process interceptor's verdict is applied on the thread that gave it).
public final class LocalRawClient: CommandRequesting, Sendable {
    public let inbox = Inbox<(command: Command, thread: ObjectIdentifier)>()
    private let connection: LocalConnection
    private let serial = Atomic<Int>(0)

    /// Attaches to `endpoint`; `answering` answers hook requests when the client logs in as an interceptor, and
    /// `headsUp` is told when one is probably on its way.
    public init(_ endpoint: any LocalEndpoint, answering: HookAnswerer? = nil, headsUp: ReviewHeadsUp? = nil) throws {
        let inbox = inbox
        guard
            let connection = endpoint.connectLocally(
                receive: { inbox.append(($0, ObjectIdentifier(Thread.current))) }, closed: { inbox.close() },
                answering: answering, headsUp: headsUp)
        else { throw IMError(.connectionFailed, "server not running") }
        self.connection = connection
    }

    /// Attaches and opens a session as `clientID`.
    public static func login(_ clientID: String, to endpoint: any LocalEndpoint) async throws -> LocalRawClient {
        let client = try LocalRawClient(endpoint)
        var open = Command(cmd: .session, op: .open)
        open.peerId = clientID
        let reply = try await client.request(open)
        guard reply.op == .opened else { throw IMError(code: reply.code ?? 0, reason: reply.reason ?? "login failed") }
        return client
    }

    public func request(_ command: Command, timeout: Duration = .seconds(10)) async throws -> Command {
        try await requestWithThread(command, timeout: timeout).command
    }

    /// The reply, and the thread the server sent it on.
    public func requestWithThread(_ command: Command, timeout: Duration = .seconds(10)) async throws
        -> (command: Command, thread: ObjectIdentifier)
    {
        var command = command
        let i = serial.add(1, ordering: .relaxed).newValue
        command.i = i
        connection.send(command)
        guard let reply = await inbox.take(timeout: timeout, where: { $0.command.i == i }) else {
            throw IMError(.requestTimeout, "no reply to \(command.cmd.rawValue)")
        }
        return reply
    }

    /// Sends a text message and returns the ack (or refusal) with the thread it came from.
    public func sendTextWithThread(_ text: String, to cid: String) async throws -> (command: Command, thread: ObjectIdentifier) {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = TypedMessage.text(text).encoded()
        return try await requestWithThread(direct)
    }

    public func close() { connection.close() }
}
