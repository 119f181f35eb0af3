@preconcurrency import Crypto
import Foundation
import HookbotTestSupport
import IMCore
import PushProviders
import XCTest
@preconcurrency import _CryptoExtras

/// A compact JWT as a receiving server reads it: header and claims decoded, the signature checked with the
/// signer's public key (what APNs, Google's token endpoint and a push service do).
struct ReceivedJWT {
    var header: [String: JSONValue]
    var claims: [String: JSONValue]
    var signingInput: [UInt8]
    var signature: [UInt8]

    init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(String(parts[0])), let claims = Base64URL.decode(String(parts[1])),
            let signature = Base64URL.decode(String(parts[2])),
            let headerJSON = (try? JSONDecoder().decode(JSONValue.self, from: Data(header)))?.objectValue,
            let claimsJSON = (try? JSONDecoder().decode(JSONValue.self, from: Data(claims)))?.objectValue
        else { return nil }
        self.header = headerJSON
        self.claims = claimsJSON
        self.signingInput = Array("\(parts[0]).\(parts[1])".utf8)
        self.signature = signature
    }

    /// ES256: `alg` is ES256 and the r||s signature verifies under `key`.
    func verifiesES256(with key: P256.Signing.PublicKey) -> Bool {
        guard header["alg"] == .string("ES256"), let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else {
            return false
        }
        return key.isValidSignature(signature, for: signingInput)
    }

    /// RS256: `alg` is RS256 and the PKCS #1 v1.5 signature over SHA-256 verifies under `key`.
    func verifiesRS256(with key: _RSA.Signing.PublicKey) -> Bool {
        guard header["alg"] == .string("RS256") else { return false }
        return key.isValidSignature(
            _RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: signingInput), padding: .insecurePKCS1v1_5)
    }
}

/// Seconds since 1970, now.
func unixNow() -> Int { Int(Date().timeIntervalSince1970) }

/// A fresh directory under the temporary directory, removed by the caller.
func temporaryDirectory(_ stem: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(stem)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// The body as a JSON object (nil when it is not one).
func jsonObject(_ bytes: [UInt8]) -> [String: JSONValue]? {
    (try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)))?.objectValue
}

extension XCTestCase {
    /// A client shut down when the test ends, also when it fails early (async-http-client stops the process
    /// when a client is dropped without shutdown).
    func pushClient(_ settings: PushHTTPSettings = PushHTTPSettings()) throws -> PushHTTPClient {
        let http = try PushHTTPClient(settings: settings)
        addTeardownBlock(releasing: http) { try? await $0.shutdown() }
        return http
    }
}
