import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Which push endpoints a Web Push or UnifiedPush provider posts to. The endpoint comes from a client, so
/// without a policy a client could make the server POST to its own network (a database port, a cloud
/// metadata address). By default only `https` to a public host name or address is allowed.
public struct PushEndpointPolicy: Sendable, Hashable {
    /// Allow `http://` endpoints (a distributor on the local network).
    public var allowHTTP: Bool
    /// Allow loopback, private, link-local and other non-public IP literals and `localhost`.
    public var allowPrivateAddresses: Bool
    /// When set, only these hosts and their subdomains (`mozilla.com` allows `updates.push.services.mozilla.com`).
    public var allowedHosts: [String]?

    public init(allowHTTP: Bool = false, allowPrivateAddresses: Bool = false, allowedHosts: [String]? = nil) {
        self.allowHTTP = allowHTTP
        self.allowPrivateAddresses = allowPrivateAddresses
        self.allowedHosts = allowedHosts
    }

    /// Public https hosts only (the default).
    public static let publicHTTPS = PushEndpointPolicy()
    /// Anything http(s): for tests and a distributor on the same machine.
    public static let any = PushEndpointPolicy(allowHTTP: true, allowPrivateAddresses: true)

    /// The endpoint as a URL, or 4701 saying why it is not allowed. Host names are not resolved: a public
    /// name that resolves to a private address is not caught here (use `allowedHosts` for that).
    public func check(_ endpoint: String) throws -> URL {
        let url = try checkedHTTPURL(endpoint, what: "push endpoint", error: PushError.invalidDeviceToken)
        let host = (url.host ?? "").lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]."))
        if url.scheme?.lowercased() == "http", !allowHTTP {
            throw PushError.invalidDeviceToken("push endpoint \(host) is not https")
        }
        if !allowPrivateAddresses, Self.isPrivate(host: host) {
            throw PushError.invalidDeviceToken("push endpoint \(host) is a loopback, private or link-local address")
        }
        if let allowedHosts, !allowedHosts.contains(where: { host == $0.lowercased() || host.hasSuffix("." + $0.lowercased()) }) {
            throw PushError.invalidDeviceToken("push endpoint host \(host) is not among the allowed push services")
        }
        return url
    }

    /// `localhost`, and IPv4/IPv6 literals that are not public unicast addresses.
    static func isPrivate(host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        if let v4 = ipv4(host) { return isPrivate(v4) }
        if host.contains(":") {
            var address = in6_addr()
            guard inet_pton(AF_INET6, host, &address) == 1 else { return true } // a zone id or garbage: not public
            let bytes = withUnsafeBytes(of: address) { Array($0) }
            if bytes[0..<15].allSatisfy({ $0 == 0 }) { return true } // :: and ::1
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff { // ::ffff:a.b.c.d
                return isPrivate(Array(bytes[12..<16]))
            }
            if bytes[0] & 0xfe == 0xfc { return true } // fc00::/7 unique local
            if bytes[0] == 0xfe, bytes[1] & 0xc0 == 0x80 { return true } // fe80::/10 link-local
            if bytes[0] == 0xff { return true } // multicast
            return false
        }
        return false
    }

    /// An IPv4 literal in any form the resolver takes (`127.0.0.1`, `127.1`, `2130706433`, `0x7f.1`).
    private static func ipv4(_ host: String) -> [UInt8]? {
        var address = in_addr()
        guard inet_aton(host, &address) != 0 else { return nil }
        return withUnsafeBytes(of: address) { Array($0) }
    }

    private static func isPrivate(_ a: [UInt8]) -> Bool {
        switch (a[0], a[1]) {
        case (0, _), (10, _), (127, _), (169, 254), (192, 168), (224...255, _): return true
        case (172, 16...31), (100, 64...127): return true // private, carrier-grade NAT
        default: return false
        }
    }
}
