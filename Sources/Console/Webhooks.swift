import BotHost
import Crypto
import Foundation
import HTTPTypes
import HookRuntime
import Hummingbird
import IMCore
import IMServer
import NIOCore
import Synchronization

/// `POST` (or `GET`) `/hooks/<plugin>/<path>`: a plugin's webhook, answered by its `on_http(req, ctx)` (docs/PLUGINS.md,
/// "Webhooks"). The caller proves it knows the plugin's secret (`[webhooks]` in `hookbot.toml`) with the
/// header `X-Hookbot-Secret: <secret>`, or signs the body as GitHub does, `X-Hub-Signature-256:
/// sha256=<hex HMAC-SHA256 of the body>`. Unknown plugin: 404; wrong or missing secret: 401; body over the
/// limit: 413; a path that cannot be normalised (`normalizedPath`): 400 — and nothing runs.
public final class Webhooks: Sendable {
    private let secrets: [String: String]
    private let maxBytes: Int
    /// Weak: these routes belong to the server, and the bot's client holds the server when attached in process (a
    /// cycle that kept a stopped server and its bot alive).
    private let bot = Mutex(Weak<BotHost>(nil))

    public init(configuration: BotConfiguration) {
        secrets = configuration.webhooks.secrets
        maxBytes = configuration.webhooks.maxBytes
    }

    /// Routes webhooks to this bot from now on.
    public func attach(_ bot: BotHost) { self.bot.withLock { $0 = Weak(bot) } }

    public func register(on router: Router<BasicRequestContext>) {
        router.post("/hooks/:plugin") { [self] request, context in await answer(request, context, path: []) }
        router.post("/hooks/:plugin/**") { [self] request, context in
            await answer(request, context, path: context.parameters.getCatchAll())
        }
        // GET (a published list read by a browser, curl or another bot): the same secret, no body.
        router.get("/hooks/:plugin") { [self] request, context in await answer(request, context, path: []) }
        router.get("/hooks/:plugin/**") { [self] request, context in
            await answer(request, context, path: context.parameters.getCatchAll())
        }
    }

    /// The path `on_http` sees, from the raw (percent-encoded) segments after `/hooks/<plugin>`: each
    /// segment percent-decoded (as UTF-8), empty segments (`//`, a trailing `/`) and `.` dropped, `..`
    /// removing the segment before it and never going above the webhook's root (RFC 3986's dot-segment
    /// removal), then joined after a leading `/`. A segment that is not valid percent-encoded UTF-8, or
    /// that decodes to a `/`, a `\` or a control character, is refused: the reason, for a 400.
    static func normalizedPath(_ raw: [Substring]) -> Result<String, WebhookPathError> {
        var segments: [String] = []
        for segment in raw {
            guard let decoded = segment.removingPercentEncoding else {
                return .failure(WebhookPathError("the path is not percent-encoded UTF-8: \(segment.prefix(100))"))
            }
            guard !decoded.unicodeScalars.contains(where: { $0 == "/" || $0 == "\\" || $0.properties.generalCategory == .control })
            else {
                return .failure(WebhookPathError("a path segment may not encode '/', '\\' or control characters: \(segment.prefix(100))"))
            }
            switch decoded {
            case "", ".": continue
            case "..": _ = segments.popLast()
            default: segments.append(decoded)
            }
        }
        return .success("/" + segments.joined(separator: "/"))
    }

    private func answer(_ request: Request, _ context: BasicRequestContext, path raw: [Substring]) async -> Response {
        let plugin = context.parameters.get("plugin")?.removingPercentEncoding ?? ""
        guard let secret = secrets[plugin] else { return HTTPJSON.error(.notFound, "no webhook for plugin \(plugin)") }
        let path: String
        switch Self.normalizedPath(raw) {
        case .success(let normalized): path = normalized
        case .failure(let problem): return HTTPJSON.error(.badRequest, problem.reason)
        }
        let presented = request.headers[HTTPField.Name("X-Hookbot-Secret")!]
        if let presented, !secretsMatch(Data(presented.utf8), Data(secret.utf8)) {
            return HTTPJSON.error(.unauthorized, "wrong secret")
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: maxBytes)
        } catch {
            return HTTPJSON.error(.contentTooLarge, "the body is larger than \(maxBytes) bytes")
        }
        let bytes = Data(buffer: body)
        if presented == nil {
            guard let signature = request.headers[HTTPField.Name("X-Hub-Signature-256")!], signature.hasPrefix("sha256=") else {
                return HTTPJSON.error(.unauthorized, "send the secret in X-Hookbot-Secret or sign the body in X-Hub-Signature-256")
            }
            let mac = HMAC<SHA256>.authenticationCode(for: bytes, using: SymmetricKey(data: Data(secret.utf8)))
            let expected = "sha256=" + mac.map { String(format: "%02x", $0) }.joined()
            guard secretsMatch(Data(signature.lowercased().utf8), Data(expected.utf8)) else {
                return HTTPJSON.error(.unauthorized, "the signature does not match the body")
            }
        }
        guard let bot = bot.withLock({ $0.value }) else { return HTTPJSON.error(.serviceUnavailable, "the bot is starting") }
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        let query = Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }) { first, _ in first }
        let hookRequest = HookHTTPRequest(
            method: request.method.rawValue, path: path, query: query, headers: headers,
            body: String(decoding: bytes, as: UTF8.self))
        guard let answer = await bot.webhook(plugin: plugin, hookRequest) else {
            return HTTPJSON.error(.notFound, "plugin \(plugin) does not take webhooks (no on_http, or not loaded)")
        }
        var fields = HTTPFields()
        for (name, value) in answer.headers {
            if let field = HTTPField.Name(name) { fields[field] = value }
        }
        if fields[.contentType] == nil, !answer.body.isEmpty { fields[.contentType] = "text/plain; charset=utf-8" }
        return Response(
            status: .init(code: answer.status), headers: fields,
            body: .init(byteBuffer: ByteBuffer(string: answer.body)))
    }
}

/// Why a webhook's path was refused (answered 400 with this reason).
struct WebhookPathError: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}
