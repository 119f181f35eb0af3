import Foundation
import IMClient
import IMCore
import IMServer
import Logging
import Synchronization
import XCTest

/// The one test server of every test target (the way Hummingbird ships HummingbirdTesting): a real server on a
/// loopback port with its own SQLite file in a temporary directory, or, with `HOOKBOT_TEST_BACKEND=postgres`,
/// its own schema in the PostgreSQL cluster `HOOKBOT_TEST_POSTGRES_URL` names (see `TestDatabase`).
public final class ServerHarness: Sendable {
    public let directory: URL
    public let server: IMServer
    public let port: Int
    /// The temporary directory this harness made (nil when the test gave one), shared with the harnesses
    /// `restarted()` makes: removed with what it holds when the last of them goes away.
    private let made: MadeDirectory?

    private init(directory: URL, server: IMServer, port: Int, made: MadeDirectory?) {
        self.directory = directory
        self.server = server
        self.port = port
        self.made = made
    }

    /// Starts a server; `port` 0 picks a free one. Without `directory`, its files go to a new temporary directory
    /// that is removed when the harness (and any harness `restarted()` made from it) is released.
    public static func start(
        directory: URL? = nil, port: Int = 0, logger: Logger? = nil,
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> ServerHarness {
        let made = directory == nil ? try MadeDirectory("hookbot-sdk") : nil
        return try await start(directory: directory ?? made!.url, made: made, port: port, logger: logger, configure: configure)
    }

    private static func start(
        directory: URL, made: MadeDirectory?, port: Int, logger: Logger? = nil,
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> ServerHarness {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = ServerConfiguration()
        configuration.port = port
        configuration.databasePath = directory.appendingPathComponent("hookbot.sqlite").path
        if TestDatabase.backend == .postgres {
            configuration.databaseURL = try TestDatabase.postgresURL(schema: TestDatabase.schemaName(for: directory))
        }
        configure(&configuration)
        var defaultLogger = Logger(label: "sdk-test-server")
        defaultLogger.logLevel = ProcessInfo.processInfo.environment["TEST_LOG"].flatMap { Logger.Level(rawValue: $0) } ?? .critical
        let logger = logger ?? defaultLogger
        let server = try IMServer(configuration: configuration, logger: logger)
        let bound = try await server.start()
        return ServerHarness(directory: directory, server: server, port: bound, made: made)
    }

    /// The server's SQLite file.
    public var databasePath: String { directory.appendingPathComponent("hookbot.sqlite").path }

    public func stop() async { await server.stop() }

    /// Stops this server (if it still runs) and starts a new one on the same port and database file.
    public func restarted() async throws -> ServerHarness {
        await stop()
        var lastError: (any Error)?
        for _ in 0..<50 {
            do { return try await ServerHarness.start(directory: directory, made: made, port: port) } catch {
                lastError = error
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        throw lastError ?? IMError(.internalError, "restart failed")
    }

    /// Options for fast tests: quick reconnects, generous timeouts.
    public func options() -> IMClientOptions {
        var options = IMClientOptions(port: port)
        options.reconnectBaseDelay = .milliseconds(50)
        options.reconnectMaxDelay = .milliseconds(400)
        options.sendTimeout = .seconds(20)
        options.requestTimeout = .seconds(10)
        options.connectTimeout = .seconds(5)
        return options
    }

    public func client(
        _ clientId: String, tag: String? = nil, registry: IMMessageRegistry = IMMessageRegistry(),
        configure: (inout IMClientOptions) -> Void = { _ in }
    ) -> IMClient {
        var options = options()
        configure(&options)
        var logger = Logger(label: "sdk-test-\(clientId)")
        logger.logLevel = ProcessInfo.processInfo.environment["TEST_LOG"].flatMap { Logger.Level(rawValue: $0) } ?? .critical
        return IMClient(clientId: clientId, tag: tag, options: options, registry: registry, logger: logger)
    }
}

/// A temporary directory `<prefix>-<UUID>`, removed with what it holds when the last reference goes: a suite
/// run starts some 1,700 servers, and their files (about 150 MB) stayed behind in the system's temporary directory.
public final class MadeDirectory: Sendable {
    public let url: URL

    public init(_ prefix: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// Waits (up to `timeout`) until `server` has registered the interceptor `clientID`, and throws `Timeout` when
/// it has not. The server answers `opened` just before it registers the session, so a message sent at once may
/// find no interceptor yet and fall to the failure policy (seen on a loaded CI machine).
public func waitUntilInterceptorAttached(_ server: IMServer, _ clientID: String, timeout: Duration = .seconds(10)) async throws {
    try await waitUntil("the interceptor \(clientID) to attach", timeout: timeout, every: .milliseconds(5)) {
        server.isInterceptorAttached(clientID)
    }
}

/// Checks `condition` every `interval` until it holds; after `timeout` throws `Timeout(waitingFor: what)`, so a
/// test that waits in vain fails saying what it waited for. For states no event announces (a registry, a file,
/// a process's output); where the test can wait for an event (a message, a push), it waits for that instead.
public func waitUntil(
    _ what: @autoclosure () -> String, timeout: Duration = .seconds(10), every interval: Duration = .milliseconds(20),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw Timeout(waitingFor: what()) }
        try await Task.sleep(for: interval)
    }
}

/// Records a client's events from the moment it is created; tests take them out in order.
public final class EventLog: Sendable {
    private let inbox = Inbox<IMEvent>()
    private let recorded = Mutex([IMEvent]())
    private let task: Task<Void, Never>

    public init(_ client: IMClient) {
        let stream = client.events()
        let box = Mutex<EventLog?>(nil)
        task = Task {
            for await event in stream { box.withLock { $0 }?.record(event) }
        }
        box.withLock { $0 = self }
    }

    deinit { task.cancel() }

    private func record(_ event: IMEvent) {
        recorded.withLock { $0.append(event) }
        inbox.append(event)
    }

    /// Every event recorded so far, consumed or not.
    public var history: [IMEvent] { recorded.withLock { $0 } }

    /// Takes the first unconsumed event for which `extract` returns a value, waiting up to `timeout`.
    public func next<T: Sendable>(
        _ what: String, timeout: Duration = .seconds(15),
        _ extract: @escaping @Sendable (IMEvent) -> T?
    ) async throws -> T {
        guard let event = await inbox.take(timeout: timeout, where: { extract($0) != nil }), let value = extract(event) else {
            throw Timeout(waitingFor: what)
        }
        return value
    }

    /// The next received message (not cmd), optionally in one conversation.
    public func message(in cid: String? = nil, timeout: Duration = .seconds(15)) async throws -> IMMessage {
        try await next("message", timeout: timeout) { event in
            if case .message(let message) = event, cid == nil || message.conversationId == cid { return message }
            return nil
        }
    }

    /// The next message in `cid` from `sender`; the others' messages before it are taken and skipped.
    public func message(from sender: String, in cid: String, timeout: Duration = .seconds(15)) async throws -> IMMessage {
        while true {
            let message = try await message(in: cid, timeout: timeout)
            if message.from == sender { return message }
        }
    }

    /// The next `count` messages of a conversation.
    public func messages(_ count: Int, in cid: String, timeout: Duration = .seconds(15)) async throws -> [IMMessage] {
        var messages: [IMMessage] = []
        for _ in 0..<count { messages.append(try await message(in: cid, timeout: timeout)) }
        return messages
    }

    /// The messages of `cid` that arrive before the first one whose text is `sentinel` (which is taken too),
    /// waiting for it up to `timeout`. To show that a message did NOT arrive, a test sends a sentinel after it
    /// and checks what came before: a conversation's messages reach each member in the order the server accepted
    /// them (and an interceptor reviews them in that order), so one that was going to arrive has arrived before
    /// the sentinel does. Only where that order covers the message in question (the same conversation, decided
    /// before the sentinel was sent); elsewhere `settle` waits.
    public func messages(before sentinel: String, in cid: String, timeout: Duration = .seconds(15)) async throws -> [IMMessage] {
        var before: [IMMessage] = []
        while true {
            let message = try await next("the sentinel \"\(sentinel)\" in \(cid)", timeout: timeout) { event in
                if case .message(let message) = event, message.conversationId == cid { return message }
                return nil
            }
            if message.content.text == sentinel { return before }
            before.append(message)
        }
    }

    /// Unconsumed events after waiting `duration` (to assert that nothing more arrives), for what no order
    /// covers (other conversations, connection events); within one conversation `messages(before:in:)` needs
    /// no pause.
    public func settle(for duration: Duration = .milliseconds(400)) async -> [IMEvent] {
        try? await Task.sleep(for: duration)
        return inbox.kept()
    }

    /// Drops unconsumed events.
    public func clear() { _ = inbox.drain() }
}

extension IMEvent {
    public var isConnectionEvent: Bool {
        switch self {
        case .opened, .paused, .resuming, .resumed, .closed, .kickedOffline: true
        default: false
        }
    }

    public var receivedMessage: IMMessage? {
        if case .message(let message) = self { return message }
        return nil
    }
}

/// Opens clients and returns them with their event logs (created before opening, so nothing is missed).
public func openClients(_ clients: [IMClient]) async throws -> [EventLog] {
    var logs: [EventLog] = []
    for client in clients {
        logs.append(EventLog(client))
        try await client.open()
    }
    return logs
}

/// Keeps the log records it receives, for tests that check what was logged.
public final class LogRecorder: Sendable {
    public struct Record: Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: [String: String]
    }

    private let records = Mutex([Record]())

    public init() {}

    /// A logger that writes here (records at `level` and above).
    public func logger(label: String = "recorded", level: Logger.Level = .info) -> Logger {
        var logger = Logger(label: label) { _ in Handler(recorder: self) }
        logger.logLevel = level
        return logger
    }

    /// The records whose message is `message`.
    public func records(_ message: String) -> [Record] { records.withLock { $0.filter { $0.message == message } } }

    /// The records at `level` or above.
    public func records(atLeast level: Logger.Level) -> [Record] { records.withLock { $0.filter { $0.level >= level } } }

    fileprivate func append(_ record: Record) { records.withLock { $0.append(record) } }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
            recorder.append(Record(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}

/// The database the server suites run on: SQLite files by default; PostgreSQL (a schema per test server in
/// the throwaway cluster `scripts/with-postgres.sh` starts) with `HOOKBOT_TEST_BACKEND=postgres`.
public enum TestDatabase {
    public enum Backend: Sendable { case sqlite, postgres }

    public static var backend: Backend {
        ProcessInfo.processInfo.environment["HOOKBOT_TEST_BACKEND"] == "postgres" ? .postgres : .sqlite
    }

    /// The throwaway cluster's URL, when one runs.
    public static var clusterURL: String? {
        ProcessInfo.processInfo.environment["HOOKBOT_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// A URL of the throwaway cluster with `schema` (created by the server on start).
    public static func postgresURL(schema: String) throws -> String {
        guard let url = clusterURL else {
            throw XCTSkip("no PostgreSQL cluster: run under scripts/with-postgres.sh (make test does)")
        }
        return url + (url.contains("?") ? "&" : "?") + "schema=" + schema
    }

    /// A new schema name, or the one that belongs to a test server's directory (so a restart finds its data).
    public static func schemaName(for directory: URL? = nil) -> String {
        let seed = directory?.lastPathComponent ?? UUID().uuidString
        return "t_" + String(seed.lowercased().filter { $0.isLetter || $0.isNumber }.suffix(40))
    }
}
