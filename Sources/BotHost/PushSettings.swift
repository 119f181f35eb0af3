import Foundation
import IMCore
import PushProviders

/// The offline-push settings of hookbot.toml (`[push]`, `[push.templates]` and one `[push.<provider>]` per push
/// service; docs/PUSH.md, "Settings"), as the bot host reads them. `hookbot run` and `hookbot server
/// --push-config` hand them to the server's `PushConfiguration` (BotHost does not link the server, so values
/// left unset here are nil and the server's defaults apply).
///
/// Every provider is built once while the file is read, so a key that cannot be used (a `.p8` that is not a
/// P-256 key, a service account without `private_key`, a VAPID key of the wrong size, a webhook secret under
/// 16 bytes) is an error naming the file, line and key at load, not at the first push.
public struct PushSettings: Sendable {
    /// One `[push.<name>]` section.
    public enum Provider: Sendable {
        case apns(APNsSettings)
        case fcm(FCMSettings)
        case webPush(WebPushSettings)
        case unifiedPush(UnifiedPushSettings)
        case webhook(WebhookSettings)

        /// The section's (and the devices') provider name.
        public var name: String {
            switch self {
            case .apns: "apns"
            case .fcm: "fcm"
            case .webPush: "webpush"
            case .unifiedPush: "unifiedpush"
            case .webhook: "webhook"
            }
        }

        /// Builds the provider: what the server sends with, and how the settings are checked at load.
        public func makeProvider(http: PushHTTPClient) throws -> any PushProvider {
            switch self {
            case .apns(let settings): try APNsProvider(settings: settings, http: http)
            case .fcm(let settings): try FCMProvider(settings: settings, http: http)
            case .webPush(let settings): try WebPushProvider(settings: settings, http: http)
            case .unifiedPush(let settings): try UnifiedPushProvider(settings: settings, http: http)
            case .webhook(let settings): try WebhookProvider(settings: settings, http: http)
            }
        }
    }

    /// The configured providers, in the order apns, fcm, webpush, unifiedpush, webhook.
    public var providers: [Provider] = []
    /// `[push] connect_timeout`, `request_timeout`, `trust_roots`: the HTTP client all providers share.
    public var http = PushHTTPSettings()
    /// `[push.templates]`: the notification text per message type (`text`, `image`, `audio`, `video`,
    /// `location`, `file`, or a type number such as `"7"`); unset types keep the server's template.
    public var templatesByType: [Int: String] = [:]
    /// `[push.templates] plain`, `other`, `title`, `sound`, `max_body_chars`; nil: the server's default.
    /// An empty `title` or `sound` leaves it out of the notification.
    public var plainTemplate: String?
    public var otherTemplate: String?
    public var titleTemplate: String??
    public var sound: String??
    public var maxBodyCharacters: Int?
    /// `[push.conversations."<cid>"]`: per conversation, the `[push.templates]` keys it overrides and
    /// `enabled` (false: no push for it), as read (checked) from the file; the server's
    /// `PushConversationTemplates` reads them.
    public var conversationTemplates: [String: [String: JSONValue]] = [:]
    /// `[push.<name>] rate`: notifications per second each provider sends at most; absent: no limit.
    public var rates: [String: Double] = [:]
    /// `[push] workers`, `retry_delay`, `max_retry_delay`, `max_age`: the persisted queue; nil: the server's.
    public var workers: Int?
    public var retryDelay: Duration?
    public var maxRetryDelay: Duration?
    public var maxAge: Duration?
    /// `[push] offline_hook_deadline_ms`: how long the server waits for the bot's `on_offline` answer (pushes are
    /// held that long); nil: the server's (1000).
    public var offlineHookDeadlineMillis: Int?

    public init() {}

    /// True when at least one provider is configured (otherwise the server queues no pushes).
    public var isEnabled: Bool { !providers.isEmpty }

    /// The provider named `name`, if configured.
    public func provider(_ name: String) -> Provider? { providers.first { $0.name == name } }

    /// The message types `[push.templates]` names, as LeanCloud's `_lctype`.
    static let typeNames: [String: Int] = ["text": -1, "image": -2, "audio": -3, "video": -4, "location": -5, "file": -6]

    /// Reads the `[push]` sections of a TOML file; other sections of the file are ignored (so the bot's
    /// hookbot.toml can be given to `hookbot server --push-config`).
    public static func load(path: String) throws -> PushSettings {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw ConfigurationError(message: "cannot read \(path): \(error.localizedDescription)")
        }
        let file = try ConfigFile(text: text, name: path)
        guard let push = file.root["push"] else { return PushSettings() }
        guard let table = push.objectValue else { throw file.error("push", "must be a table") }
        return try parse(table, file: file, base: URL(fileURLWithPath: path).deletingLastPathComponent())
    }

    /// Reads the `[push]` table of `file`; paths are relative to `base`.
    static func parse(_ table: [String: JSONValue], file: ConfigFile, base: URL) throws -> PushSettings {
        var settings = PushSettings()
        var r = ConfigTableReader(root: table, path: "push", file: file, base: base)
        if let workers = try r.int("workers") {
            guard (1...1024).contains(workers) else { throw r.error("workers", "must be between 1 and 1024") }
            settings.workers = workers
        }
        settings.retryDelay = try r.duration("retry_delay", atLeast: .milliseconds(1))
        settings.maxRetryDelay = try r.duration("max_retry_delay", atLeast: .milliseconds(1))
        if let first = settings.retryDelay, let most = settings.maxRetryDelay, most < first {
            throw r.error("max_retry_delay", "must be at least retry_delay")
        }
        settings.maxAge = try r.duration("max_age", atLeast: .seconds(1))
        if let deadline = try r.int("offline_hook_deadline_ms") {
            guard (10...60_000).contains(deadline) else { throw r.error("offline_hook_deadline_ms", "must be between 10 and 60000") }
            settings.offlineHookDeadlineMillis = deadline
        }
        if let timeout = try r.duration("connect_timeout", atLeast: .milliseconds(1)) { settings.http.connectTimeout = timeout }
        if let timeout = try r.duration("request_timeout", atLeast: .milliseconds(1)) { settings.http.requestTimeout = timeout }
        if let roots = try r.string("trust_roots") {
            let path = SettingValues.path(roots, relativeTo: base).path
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw r.error("trust_roots", "names a file that cannot be read (\(path))")
            }
            settings.http.additionalTrustRootsFile = path
        }
        // The endpoint allow-list of devices that name a URL (Web Push, UnifiedPush); each section may narrow it.
        let policy = try r.endpointPolicy(default: .publicHTTPS)
        if let templates = try r.table("templates") {
            var t = ConfigTableReader(root: templates, path: "push.templates", file: file, base: base)
            settings.plainTemplate = try t.string("plain")
            settings.otherTemplate = try t.string("other")
            if let title = try t.string("title") { settings.titleTemplate = .some(title.isEmpty ? nil : title) }
            if let sound = try t.string("sound") { settings.sound = .some(sound.isEmpty ? nil : sound) }
            if let most = try t.int("max_body_chars") {
                guard (1...4000).contains(most) else { throw t.error("max_body_chars", "must be between 1 and 4000") }
                settings.maxBodyCharacters = most
            }
            for (key, value) in t.remaining() {
                guard let type = typeNames[key] ?? Int(key) else {
                    let names = (typeNames.keys.sorted() + ["plain", "other", "title", "sound", "max_body_chars"]).joined(separator: ", ")
                    throw t.error(key, "unknown key (known: \(names), or a message type number such as \"7\")")
                }
                guard let text = value.stringValue, !text.isEmpty else { throw t.error(key, "must be a template (a non-empty string)") }
                settings.templatesByType[type] = text
            }
        }
        if let conversations = try r.table("conversations") {
            for (cid, value) in conversations.sorted(by: { $0.key < $1.key }) {
                let path = "push.conversations.\(cid)"
                guard !cid.isEmpty, let table = value.objectValue else {
                    throw file.error(path, "must be a table of template overrides for conversation \(cid)")
                }
                var t = ConfigTableReader(root: table, path: path, file: file, base: base)
                _ = try t.bool("enabled")
                _ = try t.string("title")
                _ = try t.string("sound")
                for (key, value) in t.remaining() {
                    guard typeNames[key] != nil || Int(key) != nil || key == "plain" || key == "other" else {
                        let names = (typeNames.keys.sorted() + ["plain", "other", "title", "sound", "enabled"]).joined(separator: ", ")
                        throw t.error(key, "unknown key (known: \(names), or a message type number such as \"7\")")
                    }
                    guard let text = value.stringValue, !text.isEmpty else { throw t.error(key, "must be a template (a non-empty string)") }
                }
                settings.conversationTemplates[cid] = table
            }
        }
        if let apns = try r.table("apns") {
            var s = ConfigTableReader(root: apns, path: "push.apns", file: file, base: base)
            let key = try s.secretFile("key_file", required: true)!
            let environmentName = try s.string("environment") ?? "production"
            guard let environment = APNsSettings.Environment(rawValue: environmentName) else {
                throw s.error("environment", "must be \"production\" or \"sandbox\"")
            }
            var value = APNsSettings(
                teamID: try s.required("team_id"), keyID: try s.required("key_id"), privateKeyPEM: key, topic: try s.required("topic"),
                environment: environment, endpoint: try s.url("endpoint"))
            if let most = try s.concurrency() { value.maxConcurrentRequests = most }
            if let rate = try s.rate() { settings.rates["apns"] = rate }
            try s.finish()
            settings.providers.append(.apns(value))
        }
        if let fcm = try r.table("fcm") {
            var s = ConfigTableReader(root: fcm, path: "push.fcm", file: file, base: base)
            let json = try s.secretFile("service_account", required: true)!
            var account: FCMServiceAccount
            do { account = try FCMServiceAccount(json: Array(json.utf8)) } catch {
                throw s.error("service_account", "\(error)")
            }
            if let uri = try s.url("token_uri") { account.tokenURI = uri }
            var value = FCMSettings(serviceAccount: account)
            if let endpoint = try s.url("endpoint") { value.endpoint = endpoint }
            if let most = try s.concurrency() { value.maxConcurrentRequests = most }
            if let rate = try s.rate() { settings.rates["fcm"] = rate }
            try s.finish()
            settings.providers.append(.fcm(value))
        }
        if let webPush = try r.table("webpush") {
            var s = ConfigTableReader(root: webPush, path: "push.webpush", file: file, base: base)
            var value = WebPushSettings(vapid: try s.vapid(required: true)!)
            if let ttl = try s.int("ttl") {
                guard ttl >= 0 else { throw s.error("ttl", "must be 0 or more (seconds)") }
                value.defaultTTL = ttl
            }
            value.endpointPolicy = try s.endpointPolicy(default: policy)
            if let most = try s.concurrency() { value.maxConcurrentRequests = most }
            if let rate = try s.rate() { settings.rates["webpush"] = rate }
            try s.finish()
            settings.providers.append(.webPush(value))
        }
        if let unifiedPush = try r.table("unifiedpush") {
            var s = ConfigTableReader(root: unifiedPush, path: "push.unifiedpush", file: file, base: base)
            var value = UnifiedPushSettings(vapid: try s.vapid(required: false))
            if let ttl = try s.int("ttl") {
                guard ttl >= 0 else { throw s.error("ttl", "must be 0 or more (seconds)") }
                value.defaultTTL = ttl
            }
            value.endpointPolicy = try s.endpointPolicy(default: policy)
            if let most = try s.concurrency() { value.maxConcurrentRequests = most }
            if let rate = try s.rate() { settings.rates["unifiedpush"] = rate }
            try s.finish()
            settings.providers.append(.unifiedPush(value))
        }
        if let webhook = try r.table("webhook") {
            var s = ConfigTableReader(root: webhook, path: "push.webhook", file: file, base: base)
            guard let url = try s.url("url") else { throw s.error("url", "is required (the gateway's http(s) URL)") }
            let secret = try SettingValues.expandingEnvironment(try s.required("secret"))
            var value = WebhookSettings(url: url, secret: secret)
            if let most = try s.concurrency() { value.maxConcurrentRequests = most }
            if let rate = try s.rate() { settings.rates["webhook"] = rate }
            try s.finish()
            settings.providers.append(.webhook(value))
        }
        try r.finish()
        try settings.check(file: file)
        return settings
    }

    /// Builds every provider once, as the server will, and reports the first that cannot be built with the
    /// section (and, for an unusable key, the key) it came from.
    func check(file: ConfigFile) throws {
        guard let http = Self.checkingClient else {
            throw ConfigurationError(message: "the push providers cannot be checked: no HTTP client could be made", file: file.name)
        }
        for provider in providers {
            do { _ = try provider.makeProvider(http: http) } catch let error as PushError {
                let section = "push.\(provider.name)"
                var key = section
                if error.code == 4704 {
                    switch provider {
                    case .apns: key += ".key_file"
                    case .fcm: key += ".service_account"
                    case .webPush, .unifiedPush: key += ".vapid_key"
                    case .webhook: break
                    }
                } else if error.code == 4705, case .webhook = provider {
                    key += error.reason.contains("secret") ? ".secret" : ".url"
                } else if error.code == 4705, case .webPush = provider {
                    key += ".subject"
                } else if error.code == 4705, case .unifiedPush = provider {
                    key += ".subject"
                }
                throw file.error(key, "\(error)")
            }
        }
    }

    /// The client providers are built with to check them (nothing is sent through it; it lives as long as the
    /// process, so it needs no shutdown).
    private static let checkingClient: PushHTTPClient? = try? PushHTTPClient()
}

/// What `[push…]` tables hold beyond plain values, each problem named with the file, line and key.
extension ConfigTableReader {
    mutating func required(_ key: String) throws -> String {
        guard let s = try string(key), !s.isEmpty else { throw error(key, "is required") }
        return s
    }

    mutating func duration(_ key: String, atLeast least: Duration) throws -> Duration? {
        guard let v = value(key) else { return nil }
        let parsed: Duration? =
            if let integer = v.intValue, integer >= 0 { .seconds(integer) } else { v.stringValue.flatMap(SettingValues.duration) }
        guard let parsed, parsed >= least else {
            throw error(key, "must be a duration: seconds (an integer) or a string such as \"2s\", \"5m\" or \"24h\", above zero")
        }
        return parsed
    }

    mutating func url(_ key: String) throws -> String? {
        guard let text = try string(key) else { return nil }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil
        else { throw error(key, "must be an http:// or https:// URL") }
        return text
    }

    /// `rate`: notifications per second, a number above zero (0.1 to 1,000,000).
    mutating func rate() throws -> Double? {
        guard let v = value("rate") else { return nil }
        guard let rate = v.doubleValue, rate >= 0.1, rate <= 1_000_000 else {
            throw error("rate", "must be a number of notifications per second between 0.1 and 1000000")
        }
        return rate
    }

    mutating func concurrency() throws -> Int? {
        guard let most = try int("concurrency") else { return nil }
        guard (1...10_000).contains(most) else { throw error("concurrency", "must be between 1 and 10000") }
        return most
    }

    /// A key or credential: `env:NAME` is the text of the environment variable `NAME`; anything else is a
    /// file's path, relative to the configuration file's folder.
    mutating func secretFile(_ key: String, required: Bool) throws -> String? {
        guard let reference = try string(key) else {
            if required { throw error(key, "is required (a file's path, or env:NAME)") }
            return nil
        }
        if reference.hasPrefix("env:") {
            do { return try SettingValues.expandingEnvironment(reference) } catch let problem as ConfigurationError {
                throw error(key, problem.message)
            }
        }
        let path = SettingValues.path(reference, relativeTo: base).path
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw error(key, "names a file that cannot be read (\(path))")
        }
        return text
    }

    /// `vapid_key` (a file with the PEM or base64url private key, or `env:NAME`) and `subject` (`mailto:` or `https:`).
    mutating func vapid(required: Bool) throws -> VAPIDSettings? {
        let key = try secretFile("vapid_key", required: required)
        let subject = try string("subject")
        guard let key else {
            if subject != nil { throw error("vapid_key", "is required with subject") }
            return nil
        }
        guard let subject else { throw error("subject", "is required (mailto:you@example.com or an https: URL)") }
        return VAPIDSettings(subject: subject, privateKey: key.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// `allowed_hosts`, `allow_http`, `allow_private_addresses`: which device endpoints the server posts to.
    mutating func endpointPolicy(default policy: PushEndpointPolicy) throws -> PushEndpointPolicy {
        var policy = policy
        if let hosts = value("allowed_hosts") {
            guard let list = hosts.arrayValue?.compactMap(\.stringValue), list.count == hosts.arrayValue?.count, !list.isEmpty,
                list.allSatisfy({ !$0.isEmpty && !$0.contains("/") && !$0.contains(":") })
            else { throw error("allowed_hosts", "must be a list of host names (\"fcm.googleapis.com\"; each allows its subdomains)") }
            policy.allowedHosts = list.map { $0.lowercased() }
        }
        policy.allowHTTP = try bool("allow_http") ?? policy.allowHTTP
        policy.allowPrivateAddresses = try bool("allow_private_addresses") ?? policy.allowPrivateAddresses
        return policy
    }
}
