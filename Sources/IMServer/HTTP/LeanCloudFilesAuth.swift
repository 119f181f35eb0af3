import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import IMCore

/// A failed LeanCloud storage request: an HTTP status and LeanCloud's REST body `{"code", "error"}` (with
/// Hookbot's `reason` beside it, as the IM errors have). Codes are LeanCloud's where it has one (1 internal,
/// 101 not found, 107 bad JSON, 119 not allowed, 211 unknown session, 401 unauthorized), else the status.
struct LeanCloudFilesError: Error {
    var status: HTTPResponse.Status
    var code: Int
    var reason: String
    var detail: String

    static func unauthorized(_ detail: String) -> Self { .init(status: .unauthorized, code: 401, reason: "UNAUTHORIZED", detail: detail) }
    static func unknownSession(_ detail: String) -> Self {
        .init(status: .unauthorized, code: 211, reason: "SESSION_TOKEN_INVALID", detail: detail)
    }
    static func forbidden(_ detail: String) -> Self { .init(status: .forbidden, code: 119, reason: "OPERATION_FORBIDDEN", detail: detail) }
    static func notFound(_ detail: String) -> Self { .init(status: .notFound, code: 101, reason: "OBJECT_NOT_FOUND", detail: detail) }
    static func invalidJSON(_ detail: String) -> Self { .init(status: .badRequest, code: 107, reason: "INVALID_JSON", detail: detail) }
    static func invalidField(_ detail: String) -> Self { .init(status: .badRequest, code: 142, reason: "INVALID_FIELD", detail: detail) }
    static func internalError(_ detail: String) -> Self {
        .init(status: .internalServerError, code: 1, reason: "INTERNAL_ERROR", detail: detail)
    }

    var response: Response {
        HTTPJSON.error(status, code: code, reason: reason, detail: detail)
    }
}

/// Who sent a LeanCloud storage request, from its headers, the way LeanCloud's REST API reads them:
/// - `X-LC-Sign: md5(timestamp + key),timestamp[,master]` (what the storage SDK sends by default) or
///   `X-LC-Key: key[,master]`: the app key (`ServerConfiguration.appKey`) or the master key;
/// - `X-LC-Session` (what the SDK sends for `sessionToken` in its auth options) or `X-LC-IM-Session-Token`:
///   a realtime session token, the `st` of `session opened`, naming the client.
/// A client needs its session token; the master key is the operator; the app key alone is enough only while
/// signatures are off (no master key configured), as LeanCloud lets any holder of the app key upload.
enum LeanCloudCaller: Equatable {
    case client(String)
    case app
    case master

    /// The uploader recorded for files this caller stores: the client id, or nil for the app and operator.
    var clientID: String? {
        if case .client(let id) = self { return id }
        return nil
    }

    static func identify(_ request: Request, configuration: ServerConfiguration, tokens: SessionTokens) async throws -> LeanCloudCaller {
        let headers = request.headers
        if let appID = configuration.appID, let named = headers[HTTPField.Name("X-LC-Id")!], named != appID {
            throw LeanCloudFilesError.unauthorized("X-LC-Id \(named) is not this server's app id")
        }
        let key = try appCredential(headers, configuration: configuration)
        if key == .master { return .master }
        let session = headers[HTTPField.Name("X-LC-Session")!] ?? headers[HTTPField.Name("X-LC-IM-Session-Token")!]
        if let session, !session.isEmpty {
            guard let clientID = try await tokens.clientID(for: session) else {
                throw LeanCloudFilesError.unknownSession("the session token is unknown or expired; open a session again")
            }
            return .client(clientID)
        }
        if key == .app {
            if configuration.masterKey == nil { return .app }
            throw LeanCloudFilesError.unauthorized(
                "signatures are on: send the client's session token (X-LC-Session: the st of session opened) with the app key")
        }
        throw LeanCloudFilesError.unauthorized(
            "send X-LC-Session (the st of session opened)"
                + (configuration.appKey == nil ? "" : ", or X-LC-Sign / X-LC-Key with the app key while signatures are off"))
    }

    private enum Credential { case none, app, master }

    /// The key the request proves it holds; a presented key that does not match is an error, not anonymity.
    private static func appCredential(_ headers: HTTPFields, configuration: ServerConfiguration) throws -> Credential {
        if let sign = headers[HTTPField.Name("X-LC-Sign")!] {
            let parts = sign.split(separator: ",", omittingEmptySubsequences: false).map { String($0).trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2 || (parts.count == 3 && parts[2] == "master"), let millis = Int64(parts[1]) else {
                throw LeanCloudFilesError.unauthorized("X-LC-Sign must be md5(timestamp + key),timestamp[,master]")
            }
            let master = parts.count == 3
            guard let key = master ? configuration.masterKey : configuration.appKey else {
                throw LeanCloudFilesError.unauthorized(
                    master ? "this server has no master key" : "this server has no app key; send X-LC-Session")
            }
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            guard abs(now - millis) <= Int64(configuration.signatureWindow) * 1000 else {
                throw LeanCloudFilesError.unauthorized(
                    "the X-LC-Sign timestamp is more than \(configuration.signatureWindow) s from the server's clock")
            }
            guard constantTimeEqual(md5Hex(parts[1] + key), parts[0].lowercased()) else {
                throw LeanCloudFilesError.unauthorized("X-LC-Sign does not match the \(master ? "master" : "app") key")
            }
            return master ? .master : .app
        }
        if let presented = headers[HTTPField.Name("X-LC-Key")!] {
            let master = presented.hasSuffix(",master")
            let value = master ? String(presented.dropLast(",master".count)) : presented
            guard let key = master ? configuration.masterKey : configuration.appKey else {
                throw LeanCloudFilesError.unauthorized(
                    master ? "this server has no master key" : "this server has no app key; send X-LC-Session")
            }
            guard constantTimeEqual(value, key) else {
                throw LeanCloudFilesError.unauthorized("X-LC-Key does not match the \(master ? "master" : "app") key")
            }
            return master ? .master : .app
        }
        return .none
    }

    static func md5Hex(_ text: String) -> String {
        Insecure.MD5.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}
