import BotHost
import Foundation
import HTTPTypes
import HookRuntime
import Hummingbird
import IMCore
import IMServer
import IMSignatures
import Logging
import Synchronization
import Telemetry

/// The browser console and its admin HTTP API (docs/CONSOLE.md): static files from this module's
/// resources, JSON endpoints for the plugins, the live log and interception, protected by an admin token.
///
/// Routes are added to a server before it starts (`register(on:)`), while the bot they show may only exist
/// later (`attach`): until then the bot's endpoints answer 503.
public final class Console: Sendable {
    /// What the console shows: a bot, and the embedded server when there is one.
    public struct Target: Sendable {
        public var bot: BotHost
        public var server: IMServer?
        public var lobbyID: String?

        public init(bot: BotHost, server: IMServer?, lobbyID: String?) {
            self.bot = bot
            self.server = server
            self.lobbyID = lobbyID
        }
    }

    /// The admin token the API requires (`Authorization: Bearer <token>`).
    public let token: String
    public let logs: LogBuffer
    private let settings: BotConfiguration
    /// What `attach` was given, held weakly: the console's routes belong to the server (`IMServer.addRoutes`), and
    /// a strong reference back to it (or to its bot, whose client holds the server when attached in process)
    /// made a cycle that kept a stopped server, its bot and their threads and files alive.
    private let attached = Mutex<Attached?>(nil)

    private struct Attached {
        weak var bot: BotHost?
        weak var server: IMServer?
        let hasServer: Bool
        let lobbyID: String?

        /// The target, or nil once what it showed is gone.
        var target: Target? {
            guard let bot, server != nil || !hasServer else { return nil }
            return Target(bot: bot, server: server, lobbyID: lobbyID)
        }
    }

    /// What the console shows now, if anything.
    private var target: Target? { attached.withLock { $0?.target } }
    private let assets: ConsoleAssets
    /// The moderation page's undo and the config editor (ModerationActions.swift, ConfigEditor.swift).
    let moderation = ModerationActions()
    let configEditor = ConfigEditor()

    /// - Parameters:
    ///   - configuration: the bot's configuration (console token, lobby name, app id and master key).
    ///   - logs: the bot host's log, for the live log.
    public init(configuration: BotConfiguration, logs: LogBuffer) {
        settings = configuration
        token = configuration.console.token ?? Self.randomToken()
        self.logs = logs
        assets = ConsoleAssets()
    }

    /// Shows this bot (and server) from now on.
    public func attach(_ target: Target) {
        attached.withLock {
            $0 = Attached(bot: target.bot, server: target.server, hasServer: target.server != nil, lobbyID: target.lobbyID)
        }
    }

    /// Nil when the attached bot is logged in, else why not (a condition of `GET /ready`).
    public func botNotReadyReason() async -> String? {
        guard let bot = target?.bot else { return "the bot is starting" }
        let state = await bot.client.state
        return state == .opened ? nil : "the bot is not logged in (\(state))"
    }

    /// The console's address for people: the page with the token in the fragment (never sent to the server).
    public func url(host: String, port: Int) -> String { "http://\(host):\(port)/#token=\(token)" }

    /// Adds the page, its files and the admin API to a router.
    public func register(on router: Router<BasicRequestContext>) {
        router.get("/") { [self] request, _ in page(host: request.head.authority) }
        router.get("/console/:file") { [assets] _, context in
            assets.response(for: context.parameters.get("file") ?? "")
        }
        router.get("/api/info") { [self] _, _ in info() }
        registerSchedules(on: router) // ConsoleSchedules.swift
        router.get("/api/types") { [self] _, _ in
            await withBot { target in HTTPJSON.response(.ok, await target.bot.runtime.messageTypes.map(TypeView.init)) }
        }
        router.get("/api/plugins") { [self] request, _ in
            await admin(request) { target in
                HTTPJSON.response(.ok, await target.bot.pluginViews())
            }
        }
        router.post("/api/plugins/reload") { [self] request, _ in
            await admin(request) { target in HTTPJSON.response(.ok, await target.bot.reloadView()) }
        }
        router.post("/api/plugins/:name/reload") { [self] request, context in
            await plugin(request, context) { target, name in
                HTTPJSON.response(.ok, ReloadView(await target.bot.reload(plugin: name)))
            }
        }
        router.post("/api/plugins/:name/disable") { [self] request, context in
            await plugin(request, context) { target, name in
                await target.bot.runtime.disable(name: name)
                return await pluginView(target, name)
            }
        }
        router.post("/api/plugins/:name/enable") { [self] request, context in
            await plugin(request, context) { target, name in
                await target.bot.runtime.enable(name: name)
                return await pluginView(target, name)
            }
        }
        router.get("/api/plugins/:name/state") { [self] request, context in
            await plugin(request, context) { target, name in
                do {
                    let store = target.bot.runtime.store
                    let entries = try await store.entries(plugin: name, now: target.bot.runtime.clock.now())
                    return HTTPJSON.response(
                        .ok,
                        StateView(plugin: name, entries: entries))
                } catch {
                    return HTTPJSON.error(.internalServerError, "state could not be read: \(error)")
                }
            }
        }
        router.delete("/api/plugins/:name/state/:key") { [self] request, context in
            await plugin(request, context) { target, name in
                guard let raw = context.parameters.get("key"), let key = raw.removingPercentEncoding else {
                    return HTTPJSON.error(.badRequest, "the key is not percent-encoded correctly")
                }
                do {
                    guard try await target.bot.runtime.store.remove(plugin: name, key: key) else {
                        return HTTPJSON.error(.notFound, "plugin \(name) has no key \(key)")
                    }
                    return HTTPJSON.response(.ok, ["deleted": true])
                } catch {
                    return HTTPJSON.error(.internalServerError, "the key could not be deleted: \(error)")
                }
            }
        }
        router.get("/api/logs") { [self] request, _ in
            await admin(request) { _ in logEntries(request) }
        }
        router.get("/api/interception") { [self] request, _ in
            await admin(request) { target in await interception(target) }
        }
        router.get("/api/pushes") { [self] request, _ in
            await admin(request) { target in pushes(request, target) }
        }
        router.get("/api/stats") { [self] request, _ in
            await admin(request) { target in HTTPJSON.response(.ok, await target.bot.statistics) }
        }
        router.post("/api/sign") { [self] request, _ in
            await admin(request) { _ in await sign(request) }
        }
        registerTrace(on: router)
        registerModerationAndConfig(on: router)
    }

    // MARK: Access

    /// Runs `body` with the target, or answers 503 while no bot is attached.
    func withBot(_ body: (Target) async -> Response) async -> Response {
        guard let target else { return HTTPJSON.error(.serviceUnavailable, "the bot is starting") }
        return await body(target)
    }

    /// Runs `body` when the request carries the admin token; 401 otherwise.
    func admin(_ request: Request, _ body: (Target) async -> Response) async -> Response {
        guard isAuthorized(request) else {
            return HTTPJSON.error(.unauthorized, "this needs the admin token (Authorization: Bearer <token>), printed at start")
        }
        return await withBot(body)
    }

    /// `admin`, for a plugin named in the path that is known to the bot (404 otherwise).
    func plugin(
        _ request: Request, _ context: BasicRequestContext,
        _ body: (Target, String) async -> Response
    ) async -> Response {
        await admin(request) { target in
            let name = context.parameters.get("name")?.removingPercentEncoding ?? ""
            guard await target.bot.runtime.plugins.contains(where: { $0.name == name }) else {
                return HTTPJSON.error(.notFound, "no plugin named \(name)")
            }
            return await body(target, name)
        }
    }

    private func isAuthorized(_ request: Request) -> Bool {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return false }
        return secretsMatch(Data(header.dropFirst("Bearer ".count).utf8), Data(token.utf8))
    }

    // MARK: Answers

    private func info() -> Response {
        let target = target
        return HTTPJSON.response(
            .ok,
            InfoView(
                bot: target?.bot.configuration.clientID, lobby: target?.lobbyID, lobbyName: settings.server.lobbyName,
                ws: chatSocket(target)?.absoluteString ?? "/ws",
                signatures: settings.appID != nil && settings.masterKey != nil, appId: settings.appID))
    }

    /// The WebSocket the page's chat connects to, when it is not this origin's `/ws`: the server a remote
    /// bot was configured with (`hookbot run --server`). Never anything the page's URL says.
    private func chatSocket(_ target: Target?) -> URL? {
        guard let target, target.server == nil, let url = URL(string: target.bot.client.options.url),
            let scheme = url.scheme?.lowercased(), scheme == "ws" || scheme == "wss", url.host != nil
        else { return nil }
        return url
    }

    /// The page, with a Content-Security-Policy that lets it load only its own files and connect only to
    /// its own origin (and to the IM server when that is a remote bot's: its WebSocket, and its HTTP origin
    /// for uploads): even a page tricked into building another address could not send the admin token there.
    /// Images, audio and video come from the IM server only (this origin with an embedded server): a message
    /// cannot make the page fetch from a host of the sender's choosing.
    /// `host` is the request's `Host`: its WebSocket origins are listed beside `'self'` for browsers whose
    /// `'self'` does not cover `ws:` (CSP level 2).
    private func page(host: String?) -> Response {
        var response = assets.response(for: "index.html")
        guard response.status == .ok else { return response }
        var connect = "'self'"
        var media = "'self'"
        if let host, host.wholeMatch(of: /[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?/) != nil {
            connect += " ws://\(host) wss://\(host)"
        }
        if let socket = chatSocket(target), let scheme = socket.scheme, let host = socket.host {
            let authority = "\(host.contains(":") ? "[\(host)]" : host)\(socket.port.map { ":\($0)" } ?? "")"
            let web = scheme.lowercased() == "wss" ? "https" : "http"
            connect += " \(scheme)://\(authority) \(web)://\(authority)"
            media += " \(web)://\(authority)"
        }
        response.headers[.contentSecurityPolicy] =
            "default-src 'self'; connect-src \(connect); img-src \(media); media-src \(media); "
            + "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return response
    }

    private func pluginView(_ target: Target, _ name: String) async -> Response {
        guard let status = await target.bot.runtime.plugins.first(where: { $0.name == name }) else {
            return HTTPJSON.error(.notFound, "no plugin named \(name)")
        }
        return HTTPJSON.response(.ok, PluginView(status))
    }

    private func logEntries(_ request: Request) -> Response {
        let query = request.uri.queryParameters
        var after = 0
        var limit = 200
        var level = Logger.Level.trace
        if let value = query.get("after") {
            guard let number = Int(value), number >= 0 else { return HTTPJSON.error(.badRequest, "after must be a sequence number") }
            after = number
        }
        if let value = query.get("limit") {
            guard let number = Int(value), (1...1000).contains(number) else {
                return HTTPJSON.error(.badRequest, "limit must be between 1 and 1000")
            }
            limit = number
        }
        if let value = query.get("level") {
            guard let parsed = Logger.Level(rawValue: value) else {
                return HTTPJSON.error(.badRequest, "level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            level = parsed
        }
        let plugin = query.get("plugin").flatMap { $0.isEmpty ? nil : $0 }
        let (entries, next) = logs.entries(after: after, minimumLevel: level, plugin: plugin, limit: limit)
        return HTTPJSON.response(.ok, LogView(entries: entries, next: next))
    }

    /// The last pushes the embedded server sent, retried or dropped, and its counts per provider.
    private func pushes(_ request: Request, _ target: Target) -> Response {
        let query = request.uri.queryParameters
        var after = 0
        var limit = 200
        if let value = query.get("after") {
            guard let number = Int(value), number >= 0 else { return HTTPJSON.error(.badRequest, "after must be a sequence number") }
            after = number
        }
        if let value = query.get("limit") {
            guard let number = Int(value), (0...1000).contains(number) else {
                return HTTPJSON.error(.badRequest, "limit must be between 0 and 1000")
            }
            limit = number
        }
        let cid = query.get("cid").flatMap { $0.isEmpty ? nil : $0 }
        guard let server = target.server else {
            return HTTPJSON.response(
                .ok,
                PushesView(
                    enabled: false, reason: "the IM server runs in another process: its pushes are not visible here", entries: [],
                    next: 0, providers: [:]))
        }
        guard server.isPushEnabled else {
            return HTTPJSON.response(
                .ok,
                PushesView(
                    enabled: false, reason: "no push provider is configured ([push.<name>] in hookbot.toml)", entries: [], next: 0,
                    providers: [:]))
        }
        let (entries, next) = server.recentPushes(after: after, cid: cid, limit: limit)
        return HTTPJSON.response(.ok, PushesView(enabled: true, reason: nil, entries: entries, next: next, providers: server.pushCounts))
    }

    private func interception(_ target: Target) async -> Response {
        let stats = await target.bot.statistics
        let bot = InterceptionView.Bot(verdicts: stats.verdicts, undecided: stats.undecided, blocked: stats.blocked)
        let id = target.bot.configuration.clientID
        guard let server = target.server else {
            return HTTPJSON.response(
                .ok,
                InterceptionView(
                    interceptor: id, deadlineMillis: settings.server.interceptionDeadlineMillis,
                    policy: settings.server.failClosed ? "fail-closed" : "fail-open", bot: bot))
        }
        let counted = server.interceptionStats
        let interception = server.configuration.interception
        return HTTPJSON.response(
            .ok,
            InterceptionView(
                interceptor: id, attached: server.isInterceptorAttached(id), deadlineMillis: interception.deadlineMillis,
                policy: interception.failurePolicy == .failClosed ? "fail-closed" : "fail-open",
                requests: counted.requests,
                verdicts: .init(allow: counted.allowed, block: counted.dropped, replace: counted.modified),
                timeouts: counted.timeouts,
                policyDecisions: .init(total: counted.policyApplied, declined: counted.declined, invalid: counted.failures),
                reviewsInFlight: server.reviewsInFlight.now, bot: bot))
    }

    private func sign(_ request: Request) async -> Response {
        guard let appID = settings.appID, let masterKey = settings.masterKey else {
            return HTTPJSON.error(.conflict, "signatures are off: no app id and master key are configured")
        }
        let body: SignRequest
        do {
            let buffer = try await request.body.collect(upTo: 64 * 1024)
            body = try JSONDecoder().decode(SignRequest.self, from: Data(buffer: buffer))
        } catch {
            return HTTPJSON.error(.badRequest, "expected {\"clientId\", \"action\", \"conversationId\"?, \"members\"?}: \(error)")
        }
        if let invalid = ClientID.validate(body.clientId) {
            return HTTPJSON.error(.badRequest, "clientId: \(invalid.reason)")
        }
        let members = body.members ?? []
        let action: IMSignatureAction
        switch body.action {
        case "open": action = .open
        case "start":
            // With no members a start's text is a login's (app:client::t:n): the server refuses such a start.
            guard !members.isEmpty else {
                return HTTPJSON.error(.badRequest, "start signs its members, the creator among them (with none its text is a login's)")
            }
            action = .startConversation(members: members)
        case "join", "invite", "kick":
            guard let cid = body.conversationId, !cid.isEmpty else {
                return HTTPJSON.error(.badRequest, "\(body.action) needs conversationId")
            }
            action =
                body.action == "join"
                ? .join(conversationId: cid)
                : body.action == "invite" ? .invite(conversationId: cid, members: members) : .kick(conversationId: cid, members: members)
        default:
            return HTTPJSON.error(.badRequest, "action must be open, start, join, invite or kick")
        }
        let signed = Signer(appID: appID, masterKey: masterKey).signature(for: action, clientID: body.clientId)
        return HTTPJSON.response(.ok, SignView(signature: signed.signature, timestamp: signed.timestamp, nonce: signed.nonce))
    }

    /// 128 random bits, base-36 (26 characters).
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in
            let digits = String(generator.next() as UInt64, radix: 36)
            return String(repeating: "0", count: max(0, 13 - digits.count)) + digits
        }.joined()
    }
}
