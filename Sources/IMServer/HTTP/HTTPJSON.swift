import Foundation
import Hummingbird
import IMCore

/// JSON answers of the server's HTTP endpoints (`/ready`, the console's admin API).
public enum HTTPJSON {
    /// `value` encoded as JSON with the given status.
    public static func response(_ status: HTTPResponse.Status, _ value: some Encodable) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// An error answer: `{"code": <status>, "reason": …}`.
    public static func error(_ status: HTTPResponse.Status, _ reason: String) -> Response {
        response(status, ["code": JSONValue.int(status.code), "reason": .string(reason)])
    }

    /// The error answer of the media, thumbnail, member-info and LeanCloud file endpoints:
    /// `{"code": <numeric code>, "reason": <its name>, "error": <what went wrong>}`.
    static func error(_ status: HTTPResponse.Status, code: Int, reason: String, detail: String) -> Response {
        response(status, ["code": JSONValue.int(code), "reason": .string(reason), "error": .string(detail)])
    }
}
