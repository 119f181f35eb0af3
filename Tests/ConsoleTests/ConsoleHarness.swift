import BotHost
import BotHub
import Console
import Foundation
import HookRuntime
import HookbotTestSupport
import IMClient
import IMServer
import Logging
import Telemetry
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `hookbot run` as the tests need it: an embedded server on a free loopback port with the bot, the
/// console and its admin API, plugins from a temporary folder, and the log going into a `LogBuffer`.
struct ConsoleHarness {
    let hub: EmbeddedHub
    let console: Console
    let directory: URL
    var port: Int { hub.port }
    var base: String { "http://127.0.0.1:\(hub.port)" }

    /// A moderation plugin blocking "scam" (4402 with a reason and appCode 17), and a greeter that answers `ping`,
    /// counts greetings in its state and logs.
    static let plugins = [
        "moderation.lua": """
        return {
          name = "moderation", priority = 100,
          moderation = function(msg, ctx)
            if msg.text and msg.text:find("scam", 1, true) then
              return ctx.block("scam links are not allowed here", { code = 17 })
            end
          end,
        }
        """,
        "greeter.lua": """
        return {
          name = "greeter",
          on_receive = function(msg, ctx)
            if msg.text == "ping" then
              ctx.state.incr("greeted/" .. msg.from)
              ctx.log("info", "greeting " .. msg.from)
              ctx.reply("pong, " .. msg.from .. "!")
            end
          end,
        }
        """,
    ]

    /// The repository's root (`hookbot.toml`, `plugins/`).
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The demo of `make run`: the repository's `hookbot.toml` and shipped plugins.
    static func startDemo() async throws -> ConsoleHarness {
        let configuration = try BotConfiguration.load(path: repository.appendingPathComponent("hookbot.toml").path)
        return try await start(plugins: [:], base: configuration)
    }

    static func start(
        plugins: [String: String] = Self.plugins, base: BotConfiguration? = nil,
        configure: (inout BotConfiguration) -> Void = { _ in }
    ) async throws -> ConsoleHarness {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-console-\(UUID().uuidString)")
        let pluginsDirectory = directory.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: pluginsDirectory, withIntermediateDirectories: true)
        for (name, source) in plugins {
            let file = pluginsDirectory.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try source.write(to: file, atomically: true, encoding: .utf8)
        }
        var configuration = base ?? BotConfiguration()
        if base == nil { configuration.plugins.directory = pluginsDirectory }
        configuration.statePath = directory.appendingPathComponent("state.sqlite").path
        configuration.server.database = directory.appendingPathComponent("hub.sqlite").path
        configuration.server.port = 0
        configuration.adminSocketPath = nil
        configuration.plugins.watchInterval = 0
        configure(&configuration)
        let logs = LogBuffer()
        var logger = Logger(label: "console-test") { _ in LogBufferHandler(buffer: logs, level: .debug) }
        logger.logLevel = .debug
        let console = Console(configuration: configuration, logs: logs)
        let webhooks = Webhooks(configuration: configuration)
        let hub = try await EmbeddedHub.start(configuration: configuration, logger: logger) { server in
            server.addRoutes { router in console.register(on: router) }
            server.addRoutes { router in webhooks.register(on: router) }
            server.addReadinessCheck { await console.botNotReadyReason() }
        }
        console.attach(.init(bot: hub.bot, server: hub.server, lobbyID: hub.lobbyID))
        webhooks.attach(hub.bot)
        return ConsoleHarness(hub: hub, console: console, directory: directory)
    }

    func stop() async {
        await hub.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// A client of the embedded server that has joined the lobby, with its events recorded.
    func lobbyMember(_ clientID: String) async throws -> (client: IMClient, lobby: IMConversation, events: EventLog) {
        var options = IMClientOptions(port: port)
        options.requestTimeout = .seconds(10)
        let client = IMClient(clientId: clientID, options: options)
        let events = EventLog(client)
        try await client.open()
        let lobby = client.conversation(hub.lobbyID)
        try await lobby.join()
        return (client, lobby, events)
    }

    /// The text of the next message the bot sends that `events` records.
    func botReply(_ events: EventLog, _ what: String) async throws -> String {
        let bot = hub.bot.configuration.clientID
        return try await events.next(what) { event in
            guard let message = event.receivedMessage, message.from == bot else { return nil }
            return message.content.text
        }
    }

    /// Sends `text` in `conversation` and gives the text of the bot's next message that `events` records.
    func botAnswer(to text: String, in conversation: IMConversation, _ events: EventLog) async throws -> String {
        _ = try await conversation.send(.text(text))
        return try await botReply(events, "the answer to \(text)")
    }

    /// For each row (a text to send, the answer expected), in order: sends the text, checks the bot's answer.
    func assertBotAnswers(
        _ rows: [(String, String)], in conversation: IMConversation, _ events: EventLog, file: StaticString = #filePath,
        line: UInt = #line
    ) async throws {
        for (text, expected) in rows {
            let answer = try await botAnswer(to: text, in: conversation, events)
            XCTAssertEqual(answer, expected, "the answer to \(text)", file: file, line: line)
        }
    }

    /// One HTTP request; `token` nil sends no Authorization header.
    func http(_ method: String, _ path: String, token: String? = nil, body: Data? = nil) async throws -> HTTPAnswer {
        try await HTTPAnswer.fetch(base + path, method: method, token: token, body: body)
    }

    /// `http` with the admin token.
    func admin(_ method: String, _ path: String, body: Data? = nil) async throws -> HTTPAnswer {
        try await http(method, path, token: console.token, body: body)
    }

    /// Waits until `GET path` with the admin token answers with a body that contains `text`.
    func eventuallyAdmin(_ path: String, contains text: String) async throws {
        try await eventually("GET \(path) to contain \(text)") { try await admin("GET", path).text.contains(text) }
    }

    /// The named plugin's entry in `GET /api/plugins`.
    func plugin(_ name: String) async throws -> [String: Any] {
        let plugins = try await admin("GET", "/api/plugins").array()
        guard let plugin = plugins.first(where: { $0["name"] as? String == name }) else { throw TestFailure("no plugin \(name)") }
        return plugin
    }
}

extension XCTestCase {
    /// `ConsoleHarness.start`, stopped when the test ends.
    func startConsole(
        plugins: [String: String] = ConsoleHarness.plugins, base: BotConfiguration? = nil,
        configure: (inout BotConfiguration) -> Void = { _ in }
    ) async throws -> ConsoleHarness {
        let harness = try await ConsoleHarness.start(plugins: plugins, base: base, configure: configure)
        addTeardownBlock(releasing: harness) { await $0.stop() }
        return harness
    }
}

/// `hookbot run --server` as the tests need it: a bot logged into `server` (its plugins in a folder in the
/// server's directory, its state beside them) serving the console, the admin API and its metrics on a loopback
/// port of its own.
struct RemoteBotConsole {
    let bot: BotHost
    let console: Console
    let listener: ConsoleServer
    /// The server's WebSocket URL the bot was given.
    let serverURL: String
    var base: String { "http://127.0.0.1:\(listener.port)" }

    static func start(
        server: ServerHarness, plugins: [String: String] = [:], interceptorSecret: String? = nil
    ) async throws -> RemoteBotConsole {
        let directory = server.directory.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, source) in plugins {
            try source.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        var configuration = BotConfiguration()
        configuration.plugins.directory = directory
        configuration.statePath = server.directory.appendingPathComponent("state.sqlite").path
        configuration.interceptorSecret = interceptorSecret
        configuration.adminSocketPath = nil
        configuration.plugins.watchInterval = 0
        let telemetry = Telemetry()
        let serverURL = "ws://127.0.0.1:\(server.port)/ws"
        let bot = try BotHost.make(configuration: configuration, serverURL: serverURL, metrics: telemetry.factory)
        try await bot.start()
        let console = Console(configuration: configuration, logs: LogBuffer())
        console.attach(.init(bot: bot, server: nil, lobbyID: nil))
        let listener = try await ConsoleServer.start(
            console: console, readiness: { await console.botNotReadyReason() }, telemetry: telemetry,
            host: "127.0.0.1", port: 0, logger: Logger(label: "remote-console-test"))
        return RemoteBotConsole(bot: bot, console: console, listener: listener, serverURL: serverURL)
    }

    /// Stops the console's listener, then the bot.
    func stop() async {
        await listener.stop()
        await bot.stop()
    }
}

/// An HTTP answer, read as JSON when asked.
struct HTTPAnswer {
    var status: Int
    var body: Data
    var contentType: String?
    var contentSecurityPolicy: String?
    var text: String { String(decoding: body, as: UTF8.self) }

    func json() throws -> Any { try JSONSerialization.jsonObject(with: body) }
    func object() throws -> [String: Any] {
        guard let object = try json() as? [String: Any] else { throw TestFailure("not a JSON object: \(text)") }
        return object
    }
    func array() throws -> [[String: Any]] {
        guard let array = try json() as? [[String: Any]] else { throw TestFailure("not a JSON array: \(text)") }
        return array
    }

    /// One HTTP request; `token` nil sends no Authorization header.
    static func fetch(_ url: String, method: String = "GET", token: String? = nil, body: Data? = nil) async throws -> HTTPAnswer {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.httpBody = body
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        return HTTPAnswer(
            status: http.statusCode, body: data, contentType: http.value(forHTTPHeaderField: "Content-Type"),
            contentSecurityPolicy: http.value(forHTTPHeaderField: "Content-Security-Policy"))
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` until it holds or `seconds` pass.
func eventually(_ what: String, seconds: Double = 10, _ condition: () async throws -> Bool) async throws {
    try await waitUntil(what, timeout: .seconds(seconds), every: .milliseconds(25), condition)
}

/// Waits until `conversation` takes a message (`accepted`) or refuses one (`accepted: false`): a mute or ban
/// applied or lifted on the server. Each try sends `text`.
func eventuallySending(_ text: String, in conversation: IMConversation, accepted: Bool, _ what: String) async throws {
    try await eventually(what) {
        do {
            _ = try await conversation.send(.text(text))
            return accepted
        } catch {
            return !accepted
        }
    }
}
