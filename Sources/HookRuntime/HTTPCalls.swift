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
    /// The hosts (and host:port pairs) the plugin may call: every redirect's target is checked against them.
    public var allowedHosts: Set<String> = []
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

/// Performs the plugins' HTTP calls (the bot host's uses async-http-client; `hookbot test` answers from
/// recordings). A transport makes one exchange and never follows redirects itself: `perform` follows
/// them, checking each hop against the plugin's allowed hosts.
public protocol HookHTTPTransport: Sendable {
    /// One request and its answer, as it came (a 3xx is an answer like any other).
    func exchange(_ call: HookHTTPCall) async -> HookHTTPOutcome
}

/// Redirects of plugins' HTTP calls: followed only to http(s) URLs on the plugin's allowed hosts, never
/// from https down to http, at most `maxHops` times, all within the call's timeout. Any other redirect
/// ends the call with its 3xx status and an error that says why it was not followed; nothing is sent to
/// the refused target.
public enum HTTPRedirects {
    /// Redirects followed for one call at most.
    public static let maxHops = 5
    static let statuses: Set<Int> = [301, 302, 303, 307, 308]
    /// Headers that carry credentials: dropped when a redirect leads to another host or port.
    static let credentials: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// The next request after `outcome` answered `call`: nil when the answer is not a redirect to follow,
    /// else the request or why it may not be made.
    static func next(after call: HookHTTPCall, _ outcome: HookHTTPOutcome) -> Result<HookHTTPCall, TextError>? {
        guard outcome.error == nil, let status = outcome.status, statuses.contains(status),
            let location = outcome.headers.first(where: { $0.key.lowercased() == "location" })?.value
        else { return nil }
        guard let target = URL(string: location, relativeTo: call.url)?.absoluteURL, let scheme = target.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = target.host?.lowercased(), !host.isEmpty
        else {
            return .failure(TextError("redirect refused: \(location) is not an http or https URL"))
        }
        let hostPort = target.port.map { "\(host):\($0)" }
        guard call.allowedHosts.contains(host) || hostPort.map(call.allowedHosts.contains) == true else {
            return .failure(
                TextError("redirect refused: \(hostPort ?? host) is not in this plugin's allowed hosts ([http.\(call.plugin)] hosts)"))
        }
        if call.url.scheme?.lowercased() == "https", scheme == "http" {
            return .failure(TextError("redirect refused: from https down to http (\(target.absoluteString))"))
        }
        var next = call
        next.url = target
        let changesToGet = status == 303 ? call.method != "HEAD" : (status == 301 || status == 302) && call.method == "POST"
        if changesToGet {
            next.method = "GET"
            next.body = nil
            next.headers = next.headers.filter { !["content-type", "content-length"].contains($0.key.lowercased()) }
        }
        if Self.origin(of: target) != Self.origin(of: call.url) {
            next.headers = next.headers.filter { !credentials.contains($0.key.lowercased()) }
        }
        return .success(next)
    }

    private static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
    }
}

extension HookHTTPTransport {
    /// Performs a call, following redirects as `HTTPRedirects` allows, within the call's timeout overall.
    public func perform(_ call: HookHTTPCall) async -> HookHTTPOutcome {
        let deadline = ContinuousClock.now + .nanoseconds(Int64(call.timeout * 1e9))
        var current = call
        var hops = 0
        while true {
            let outcome = await exchange(current)
            guard let next = HTTPRedirects.next(after: current, outcome) else { return outcome }
            var refused = HookHTTPOutcome(status: outcome.status, headers: outcome.headers)
            switch next {
            case .failure(let problem):
                refused.error = problem.description
                return refused
            case .success(var request):
                guard hops < HTTPRedirects.maxHops else {
                    refused.error = "redirect refused: more than \(HTTPRedirects.maxHops) redirects"
                    return refused
                }
                let left = deadline - ContinuousClock.now
                guard left > .zero else { return HookHTTPOutcome(error: "timeout: no answer within \(call.timeout.formatted()) s") }
                let (seconds, attoseconds) = left.components
                request.timeout = Double(seconds) + Double(attoseconds) / 1e18
                hops += 1
                current = request
            }
        }
    }
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
    func check(_ options: JSONValue, plugin: String, id: Int, inFlight: Int) -> Result<HookHTTPCall, TextError> {
        guard case .object(let fields) = options else { return .failure(TextError("expects a table {url = ..., method = ...}")) }
        guard let text = fields["url"]?.stringValue, let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = url.host?.lowercased()
        else {
            return .failure(TextError("url must be an http or https URL"))
        }
        let port = url.port.map { "\(host):\($0)" }
        guard hosts.contains(host) || port.map(hosts.contains) == true else {
            return .failure(TextError("\(port ?? host) is not in this plugin's allowed hosts ([http.\(plugin)] hosts)"))
        }
        guard inFlight < concurrency else {
            return .failure(TextError("too many requests in flight (\(concurrency)); try again when one has finished"))
        }
        let method = (fields["method"]?.stringValue ?? "GET").uppercased()
        guard ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"].contains(method) else {
            return .failure(TextError("method must be GET, POST, PUT, PATCH, DELETE or HEAD"))
        }
        var headers: [String: String] = [:]
        var headerBytes = 0
        for (name, value) in fields["headers"]?.objectValue ?? [:] {
            guard let text = value.stringValue else { return .failure(TextError("header \(name) must be a string")) }
            headerBytes += name.utf8.count + text.utf8.count
            guard headers.count < StoredText.maxHeaderCount, headerBytes <= StoredText.maxHeaderBytes else {
                return .failure(
                    TextError(
                        "headers must be at most \(StoredText.maxHeaderCount) and \(StoredText.maxHeaderBytes) bytes in all"))
            }
            headers[name] = text
        }
        var body = fields["body"]?.stringValue
        if let json = fields["json"] {
            body = json.jsonString()
            headers["Content-Type"] = headers["Content-Type"] ?? "application/json"
        }
        let timeout = min(fields["timeout"]?.doubleValue ?? timeoutCap, timeoutCap)
        guard timeout > 0 else { return .failure(TextError("timeout must be a positive number of seconds")) }
        return .success(
            HookHTTPCall(
                id: id, plugin: plugin, method: method, url: url, headers: headers, body: body,
                timeout: timeout, maxBytes: maxBytes, allowedHosts: hosts, instanceID: 0))
    }
}
