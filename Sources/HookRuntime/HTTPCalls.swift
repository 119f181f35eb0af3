import Foundation
import IMCore

/// What a plugin may reach over HTTP (`[http.<plugin>]` in `hookbot.toml`): nothing unless listed.
public struct HTTPPolicy: Sendable, Hashable {
    /// Hosts (`api.example.org`) or host:port pairs (`127.0.0.1:8765`) the plugin may call.
    public var hosts: Set<String> = []
    /// The longest a request may take, in seconds (a request's own `timeout` is capped by it).
    public var timeoutCap: Double = 10
    /// The largest response body, in bytes.
    public var maxBytes = 1 << 20
    /// Requests of the plugin in flight at once.
    public var concurrency = 4

    public init(hosts: Set<String> = [], timeoutCap: Double = 10, maxBytes: Int = 1 << 20, concurrency: Int = 4) {
        self.hosts = hosts
        self.timeoutCap = timeoutCap
        self.maxBytes = maxBytes
        self.concurrency = concurrency
    }
}

/// An HTTP request a plugin started with `ctx.http`, checked against its policy.
public struct HookHTTPCall: Sendable, Hashable {
    public var id: Int
    public var plugin: String
    public var method: String
    public var url: URL
    public var headers: [String: String]
    public var body: String?
    /// Seconds.
    public var timeout: Double
    public var maxBytes: Int
    /// The plugin instance, conversation and message the call was made for (its callback runs with them).
    var instanceID: Int
    var cid: String?
    var messageID: String?
}

/// How a call ended: a response, or what went wrong (`timeout`, `too large`, `refused: …`).
public struct HookHTTPOutcome: Sendable, Hashable {
    public var status: Int?
    public var headers: [String: String]
    public var body: String
    public var error: String?

    public init(status: Int? = nil, headers: [String: String] = [:], body: String = "", error: String? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.error = error
    }

    /// The table the callback gets: `{ok, status, headers, body, json, error}`.
    var lua: JSONValue {
        var fields: [String: JSONValue] = ["ok": .bool(error == nil && (200..<300).contains(status ?? 0))]
        if let status { fields["status"] = .int(status) }
        fields["headers"] = .object(headers.mapValues(JSONValue.string))
        fields["body"] = .string(body)
        if let json = try? JSONValue(parsing: body) { fields["json"] = json }
        if let error { fields["error"] = .string(error) }
        return .object(fields)
    }
}

/// Performs the plugins' HTTP calls (the bot host's uses async-http-client).
public protocol HookHTTPTransport: Sendable {
    func perform(_ call: HookHTTPCall) async -> HookHTTPOutcome
}

/// Counts of one plugin's HTTP calls.
public struct HTTPUsage: Sendable, Hashable {
    public var started = 0
    public var failed = 0
    public var refused = 0
    public var inFlight = 0
}

extension HTTPPolicy {
    /// Checks a request a plugin asked for; the call, or why it may not be made.
    func check(_ options: JSONValue, plugin: String, id: Int, inFlight: Int) -> Result<HookHTTPCall, CommandError> {
        guard case .object(let fields) = options else { return .failure(CommandError("expects a table {url = ..., method = ...}")) }
        guard let text = fields["url"]?.stringValue, let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = url.host?.lowercased()
        else {
            return .failure(CommandError("url must be an http or https URL"))
        }
        let port = url.port.map { "\(host):\($0)" }
        guard hosts.contains(host) || port.map(hosts.contains) == true else {
            return .failure(CommandError("\(port ?? host) is not in this plugin's allowed hosts ([http.\(plugin)] hosts)"))
        }
        guard inFlight < concurrency else {
            return .failure(CommandError("too many requests in flight (\(concurrency)); try again when one has finished"))
        }
        let method = (fields["method"]?.stringValue ?? "GET").uppercased()
        guard ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"].contains(method) else {
            return .failure(CommandError("method must be GET, POST, PUT, PATCH, DELETE or HEAD"))
        }
        var headers: [String: String] = [:]
        for (name, value) in fields["headers"]?.objectValue ?? [:] {
            guard let text = value.stringValue else { return .failure(CommandError("header \(name) must be a string")) }
            headers[name] = text
        }
        var body = fields["body"]?.stringValue
        if let json = fields["json"] {
            body = json.jsonString()
            headers["Content-Type"] = headers["Content-Type"] ?? "application/json"
        }
        let timeout = min(fields["timeout"]?.doubleValue ?? timeoutCap, timeoutCap)
        guard timeout > 0 else { return .failure(CommandError("timeout must be a positive number of seconds")) }
        return .success(
            HookHTTPCall(
                id: id, plugin: plugin, method: method, url: url, headers: headers, body: body,
                timeout: timeout, maxBytes: maxBytes, instanceID: 0))
    }
}
