import Foundation
import IMCore
import IMSignatures
import Logging
import NIOWebSocket
import Synchronization

/// Handles the commands of logged-in and logging-in connections. It knows nothing about the encoding
/// of frames: connections decode commands before handing them here and encode what it sends.
final class IMService: Sendable {
    let configuration: ServerConfiguration
    let store: any ServerStore
    let registry = SessionRegistry()
    let receipts = ReceiptTracker()
    let rooms = ChatRooms()
    let tokens: SessionTokens
    let pipeline: MessagePipeline
    let storageCounters = StorageCounters()
    let metrics: ServerMetrics
    let signatures: SignatureVerifier?
    let interceptors: InterceptorHub
    let interception: InterceptionStage
    /// Set when the store is shared by several nodes (PostgreSQL).
    let cluster: ClusterNode?
    /// Mutes, blocks and roles of recently used conversations (`IMService+MemberControls.swift`).
    let memberControlCache = MemberControlCache()
    /// Will messages held per connection (`IMService+SDKGaps.swift`).
    let wills = WillMessages()
    /// Set by `goAway()`: a session that opens from then on is told `goaway` as soon as it is registered.
    let goingAway = Atomic<Bool>(false)
    private let interceptorLogins: [String: SignatureVerifier]
    let logger: Logger
    /// Uploaded files (docs/MEDIA.md), when the storage backend keeps them; file messages are filled from it.
    let media: (any MediaStore)?
    /// How file URLs are written and checked (public URL, listening address, signatures).
    let mediaURLs: MediaURLs
    /// Thumbnails of stored images: the server's limits and its on-disk cache.
    let mediaThumbnails: MediaThumbnails
    /// Offline push (docs/PUSH.md), when providers are configured.
    let pushes: PushDispatcher?
    /// Counts sessions opened and closed, for returning free memory after a churn (`MemoryTrimService`).
    let memoryTrim: MemoryTrim

    init(configuration: ServerConfiguration, logger: Logger, metrics: ServerMetrics) throws {
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        memoryTrim = MemoryTrim(threshold: configuration.memoryTrimAfterSessions)
        let store = try Self.openStore(configuration, logger: logger)
        self.store = store
        media = try MediaStores.open(configuration, store: store)
        mediaURLs = MediaURLs(configuration)
        mediaThumbnails = MediaThumbnails(configuration)
        cluster = (store as? PostgresStore).map {
            ClusterNode(store: $0, address: "\(configuration.host):\(configuration.port)", metrics: metrics, logger: logger)
        }
        tokens = SessionTokens(store: store, ttl: TimeInterval(configuration.sessionTokenTTL))
        interceptors = InterceptorHub(configuration: configuration.interception, metrics: metrics, logger: logger, cluster: cluster)
        pushes = try PushDispatcher.make(
            configuration, store: store, registry: registry, metrics: metrics, logger: logger, interceptors: interceptors)
        let environment = ProcessInfo.processInfo.environment
        let inlineLimit = environment["HOOKBOT_INLINE_COMMIT"].flatMap { Int($0) } ?? configuration.inlineCommitLimit
        pipeline = MessagePipeline(
            store: store, registry: registry, receipts: receipts, rooms: rooms,
            counters: storageCounters, metrics: metrics, logger: logger, fansOutLocally: cluster == nil, pushes: pushes,
            inlineLimit: max(0, inlineLimit), inlineBudget: configuration.inlineCommitBudget)
        interception = InterceptionStage(
            hub: interceptors, pipeline: pipeline, metrics: metrics,
            admission: ReviewAdmission(
                perSender: max(1, configuration.interception.reviewsPerSender),
                overall: max(1, configuration.interception.reviewsInFlight)))
        interceptorLogins = Dictionary(
            uniqueKeysWithValues: configuration.interception.interceptors.map { interceptor in
                let signer = Signer(appID: configuration.appID ?? "hookbot", masterKey: interceptor.secret)
                return (
                    interceptor.clientID,
                    SignatureVerifier(
                        signer: signer, windowSeconds: configuration.signatureWindow, store: store,
                        scope: "interceptor:\(interceptor.clientID)")
                )
            })
        if let appID = configuration.appID, let key = configuration.masterKey {
            signatures = SignatureVerifier(
                signer: Signer(appID: appID, masterKey: key), windowSeconds: configuration.signatureWindow, store: store, scope: "app")
            logger.info("signatures required for login and conversation actions", metadata: ["appId": "\(appID)"])
        } else {
            signatures = nil
            logger.notice("signatures are off: no app id and master key configured; any client id may log in")
        }
    }

    /// The store the configuration names: PostgreSQL for a `databaseURL`, else the SQLite file.
    static func openStore(_ configuration: ServerConfiguration, logger: Logger) throws -> any ServerStore {
        if let url = configuration.databaseURL {
            return try PostgresStore(url: url, logger: logger)
        }
        return try SQLiteStore(
            path: configuration.databasePath, synchronousFull: configuration.synchronousFull,
            integrityCheckSeconds: configuration.integrityCheckSeconds, logger: logger)
    }

    /// Handles one command received on a transport, in the session it belongs to (see `Transport`).
    func handle(_ command: Command, arrivingOn transport: Transport) async {
        guard let connection = transport.connection(for: command) else {
            let error = IMError(.sessionRequired, "no session for '\(command.peerId ?? "")' on this connection; open one first")
            return transport.write(transport.encoder(Self.errorReply(error, to: command)))
        }
        await handle(await resolvingRangeAcknowledgement(command, on: connection), on: connection)
    }

    /// Handles one decoded command. Every request (a command with `i`) gets exactly one reply.
    func handle(_ command: Command, on connection: Connection) async {
        metrics.command(command.cmd, command.op)
        do {
            try await dispatch(command, on: connection)
        } catch let error as IMError {
            metrics.command(command.cmd, command.op, code: error.code)
            connection.send(Self.errorReply(error, to: command))
        } catch {
            logger.error("command failed", metadata: ["cmd": "\(command.cmd.rawValue)", "error": "\(error)"])
            metrics.command(command.cmd, command.op, code: IMErrorCode.internalError.rawValue)
            connection.send(Self.errorReply(IMError(.internalError), to: command))
        }
    }

    /// The reply for a failed request: `ack` for messages, `session closed` for logins, `error` otherwise.
    static func errorReply(_ error: IMError, to command: Command?) -> Command {
        var reply: Command
        switch (command?.cmd, command?.op) {
        case (.direct?, _): reply = Command(cmd: .ack)
        case (.session?, .open?): reply = Command(cmd: .session, op: .closed)
        default: reply = Command(cmd: .error)
        }
        reply.i = command?.i
        reply.code = error.code
        reply.reason = error.reason
        reply.detail = error.detail
        reply.appCode = error.appCode
        return reply
    }

    func dispatch(_ command: Command, on connection: Connection) async throws {
        if command.cmd == .session, command.op == .open {
            return try await openSession(command, on: connection)
        }
        if command.cmd == .echo {
            var reply = Command(cmd: .echo, i: command.i)
            reply.t = Identifiers.nowMillis()
            return connection.send(reply)
        }
        guard let identity = connection.identity else {
            throw IMError(.sessionRequired, "open a session first")
        }
        switch (command.cmd, command.op) {
        case (.session, .close?):
            // A session that logs itself out cannot be resumed with its token.
            if let token = identity.sessionToken { try await tokens.revoke(token) }
            try await removeLoginDevice(of: identity)
            connection.send(Command(cmd: .session, op: .closed, i: command.i))
            connectionClosed(connection)
            connection.close()
        case (.direct, _):
            try await sendMessage(command, from: identity.clientID, on: connection)
        case (.ack, _):
            await acknowledge(command, by: identity.clientID, on: connection)
        case (.conv, .start?):
            try await startConversation(command, by: identity.clientID, on: connection)
        case (.conv, .add?), (.conv, .join?):
            try await addMembers(command, by: identity.clientID, on: connection)
        case (.conv, .remove?), (.conv, .quit?):
            try await removeMembers(command, by: identity.clientID, on: connection)
        case (.session, .query?):
            try await onlineStatus(command, on: connection)
        case (.conv, .maxRead?):
            try await receiptTimestamps(command, for: identity.clientID, on: connection)
        case (.conv, .count?):
            try await countMembers(command, on: connection)
        case (.conv, .query?):
            try await queryConversations(command, on: connection)
        case (.conv, .update?):
            try await updateConversation(command, by: identity.clientID, on: connection)
        case (.conv, .mute?), (.conv, .unmute?):
            try await setMuted(command, by: identity.clientID, on: connection)
        case (.conv, .addShutup?), (.conv, .removeShutup?), (.conv, .queryShutup?), (.conv, .memberInfoUpdate?), (.blacklist, _):
            try await handleMemberControl(command, by: identity.clientID, on: connection)
        case (.logs, _):
            try await history(command, for: identity.clientID, on: connection)
        case (.patch, .modify?):
            try await patchMessage(command, by: identity.clientID, on: connection)
        case (.read, _):
            try await markRead(command, by: identity.clientID, on: connection)
        case (.device, _):
            try await handleDevice(command, by: identity, on: connection)
        case (.hook, .verdict?):
            guard interceptors.isInterceptor(identity.clientID) else {
                throw IMError(.notInterceptor, "\(identity.clientID) is not a configured interceptor")
            }
            let matched = interceptors.resolve(command, from: connection)
            if !matched { logger.debug("late or unknown verdict", metadata: ["id": "\(command.id ?? "")"]) }
            if let serial = command.i { connection.send(Command(cmd: .ack, i: serial)) }
        default:
            throw IMError(.unknownCommand, "unsupported command \(command.cmd.rawValue) \(command.op?.rawValue ?? "")")
        }
    }

    /// Whether `clientID` is a configured interceptor's.
    func isInterceptorID(_ clientID: String) -> Bool { interceptorLogins[clientID] != nil }

    /// Interceptor ids must log in with a signature made with their secret (or the master key).
    func authenticateInterceptor(_ command: Command, clientID: String) async throws {
        guard let verifier = interceptorLogins[clientID] else { return }
        if let signatures, (try? await signatures.verify(.open, by: clientID, command: command, failure: .signatureFailed)) != nil {
            return
        }
        do {
            try await verifier.verify(.open, by: clientID, command: command, failure: .signatureFailed)
        } catch let error as IMError {
            // Say what an interceptor login needs: a bot started without --interceptor-secret (or with
            // another secret than the server's) otherwise sees only 4102.
            throw IMError(
                .signatureFailed,
                "\(error.detail ?? error.reason); \(clientID) is this server's interceptor (--interceptor \(clientID)=SECRET): "
                    + "it logs in signed with that secret (hookbot run --interceptor-secret SECRET, or interceptor_secret under [bot])")
        }
    }
}
