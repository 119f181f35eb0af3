import IMCore

/// A raw protocol test client (JSON or protobuf) that sends a command and awaits its reply; the commands
/// the test targets send most are built once here.
public protocol CommandRequesting {
    func request(_ command: Command, timeout: Duration) async throws -> Command
}

extension CommandRequesting {
    /// Starts a conversation and returns its id.
    public func startConversation(
        members: [String], name: String? = nil, unique: Bool = false, attr: JSONValue? = nil
    ) async throws -> String {
        var start = Command(cmd: .conv, op: .start)
        start.m = members
        start.name = name
        start.unique = unique ? true : nil
        start.attr = attr
        let reply = try await request(start, timeout: .seconds(10))
        guard reply.op == .started, let cid = reply.cid else {
            throw IMError(code: reply.code ?? 0, reason: reply.reason ?? "conv start failed")
        }
        return cid
    }

    /// Sends a text message and returns the ack.
    @discardableResult
    public func sendText(
        _ text: String, to cid: String, transient: Bool = false, receipt: Bool = false, dedupeToken: String? = nil
    ) async throws -> Command {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = TypedMessage.text(text).encoded()
        direct.transient = transient ? true : nil
        direct.r = receipt ? true : nil
        direct.dt = dedupeToken
        return try await request(direct, timeout: .seconds(10))
    }
}
