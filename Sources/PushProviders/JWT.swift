@preconcurrency import Crypto
import Foundation
import IMCore
@preconcurrency import _CryptoExtras

/// Base64url without padding (RFC 4648 §5), what JWTs and Web Push keys use.
public enum Base64URL {
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes base64url, with or without padding (standard base64's `+` and `/` are taken too, as browsers
    /// and libraries differ); nil when it is not base64.
    public static func decode(_ text: String) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard = standard.trimmingCharacters(in: CharacterSet(charactersIn: "="))
        if standard.count % 4 == 1 { return nil }
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard).map { Array($0) }
    }
}

/// Compact JWS (RFC 7515) for the two algorithms the providers ask for: ES256 (APNs, VAPID) and RS256 (Google's
/// OAuth JWT-bearer grant). Claims are written as compact JSON with sorted keys.
enum JWT {
    static func es256(header: [String: JSONValue], claims: [String: JSONValue], key: P256.Signing.PrivateKey) throws -> String {
        var header = header
        header["alg"] = .string("ES256")
        let input = signingInput(header: header, claims: claims)
        // JWS wants r || s (64 bytes), which is CryptoKit's raw representation.
        let signature = try key.signature(for: Array(input.utf8)).rawRepresentation
        return input + "." + Base64URL.encode(signature)
    }

    static func rs256(header: [String: JSONValue], claims: [String: JSONValue], key: _RSA.Signing.PrivateKey) throws -> String {
        var header = header
        header["alg"] = .string("RS256")
        let input = signingInput(header: header, claims: claims)
        let signature = try key.signature(for: SHA256.hash(data: Array(input.utf8)), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    private static func signingInput(header: [String: JSONValue], claims: [String: JSONValue]) -> String {
        Base64URL.encode(Array(JSONValue.object(header).jsonString().utf8)) + "."
            + Base64URL.encode(Array(JSONValue.object(claims).jsonString().utf8))
    }
}

/// A token reused while it is younger than its lifetime, made anew after that or when the provider refused it.
/// Concurrent callers share one refresh.
actor TokenCache {
    struct Token: Sendable {
        var value: String
        var validUntil: ContinuousClock.Instant
    }

    private var current: Token?
    private var refreshing: Task<Token, any Error>?
    private let make: @Sendable () async throws -> Token

    init(make: @escaping @Sendable () async throws -> Token) { self.make = make }

    /// The cached token, or a new one when there is none or it is past its time.
    func token() async throws -> String {
        if let current, ContinuousClock.now < current.validUntil { return current.value }
        return try await refresh()
    }

    /// Drops `value` if it is still the cached token (a provider said it expired), so the next `token()`
    /// makes a new one; a token already replaced by another caller is kept.
    func invalidate(_ value: String) {
        if current?.value == value { current = nil }
    }

    private func refresh() async throws -> String {
        if let refreshing { return try await refreshing.value.value }
        let task = Task { try await make() }
        refreshing = task
        defer { refreshing = nil }
        let token = try await task.value
        current = token
        return token.value
    }
}
