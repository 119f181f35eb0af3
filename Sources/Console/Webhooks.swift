import BotHost
import Crypto
import Foundation
import HTTPTypes
import HookRuntime
import Hummingbird
import IMServer
import NIOCore
import Synchronization

/// `POST /hooks/<plugin>/<path>`: a plugin's webhook, answered by its `on_http(req, ctx)` (docs/PLUGINS.md,
/// "Webhooks"). The caller proves it knows the plugin's secret (`[webhooks]` in `hookbot.toml`) with the
/// header `X-Hookbot-Secret: <secret>`, or signs the body as GitHub does, `X-Hub-Signature-256:
/// sha256=<hex HMAC-SHA256 of the body>`. Unknown plugin: 404; wrong or missing secret: 401; body over the
/// limit: 413 — and nothing runs.
public final class Webhooks: Sendable {
    private let secrets: [String: String]
    private let maxBytes: Int
    private let bot = Mutex<BotHost?>(nil)

    public init(configuration: BotConfiguration) {
        secrets = configuration.webhookSecrets
        maxBytes = configuration.webhookMaxBytes
    }

    /// Routes webhooks to this bot from now on.
    public func attach(_ bot: BotHost) { self.bot.withLock { $0 = bot } }

    public func register(on router: Router<BasicRequestContext>) {
        router.post("/hooks/:plugin") { [self] request, context in await answer(request, context, path: []) }
        router.post("/hooks/:plugin/**") { [self] request, context in
            await answer(request, context, path: context.parameters.getCatchAll())
        }
    }

    private func answer(_ request: Request, _ context: BasicRequestContext, path: [Substring]) async -> Response {
        let plugin = context.parameters.get("plugin")?.removingPercentEncoding ?? ""
        guard let secret = secrets[plugin] else { return HTTPJSON.error(.notFound, "no webhook for plugin \(plugin)") }
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
        guard let bot = bot.withLock({ $0 }) else { return HTTPJSON.error(.serviceUnavailable, "the bot is starting") }
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        let query = Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }) { first, _ in first }
        let hookRequest = HookHTTPRequest(
            method: request.method.rawValue, path: "/" + path.joined(separator: "/"), query: query, headers: headers,
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
