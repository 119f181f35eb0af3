import Foundation
import HTTPTypes
import Hummingbird
import IMCore

/// `GET /1.1/classes/_ConversationMemberInfo?where={"cid": …}`: the members of a conversation with their
/// roles, as LeanCloud's SDKs fetch them before `MEMBER_INFO_UPDATED` and for `getAllMemberInfo()`. The
/// caller names itself with the header `X-LC-IM-Session-Token` (the `st` of its `session opened`) and must
/// be a member. Errors answer `{"code", "reason", "error"}` with LeanCloud's codes.
enum MemberInfoRoute {
    static let path = "/1.1/classes/_ConversationMemberInfo"

    static func register(on router: Router<BasicRequestContext>, service: IMService) {
        router.get(RouterPath(path)) { request, _ -> Response in
            do {
                return try await answer(request, service: service)
            } catch let error as IMError {
                return failure(error)
            } catch {
                return failure(IMError(.internalError))
            }
        }
    }

    private static func failure(_ error: IMError) -> Response {
        let status: HTTPResponse.Status =
            switch error.knownCode {
            case .sessionTokenExpired?: .unauthorized
            case .conversationMembershipRequired?: .forbidden
            case .invalidMessagingTarget?: .notFound
            case .internalError?: .internalServerError
            default: .badRequest
            }
        return HTTPJSON.error(status, code: error.code, reason: error.reason, detail: error.detail ?? error.reason)
    }

    private static func answer(_ request: Request, service: IMService) async throws -> Response {
        guard let token = request.headers[HTTPField.Name("X-LC-IM-Session-Token")!], !token.isEmpty else {
            throw IMError(.sessionTokenExpired, "the header X-LC-IM-Session-Token (the st of session opened) is missing")
        }
        guard let clientID = try await service.tokens.clientID(for: token) else {
            throw IMError(.sessionTokenExpired, "the session token is unknown or expired; open a session again")
        }
        let query = Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }) { first, _ in first }
        if let named = query["client_id"], named != clientID {
            throw IMError(.invalidLogin, "client_id \(named) is not the client of the session token")
        }
        guard let text = query["where"], let condition = JSONValue.parse(text)?.objectValue else {
            throw IMError(.invalidField, "where must be a JSON object such as {\"cid\": \"…\"}")
        }
        guard let cid = condition["cid"]?.stringValue, !cid.isEmpty else {
            throw IMError(.invalidField, "where.cid (the conversation id, a string) is required")
        }
        let onlyClient = condition["clientId"]?.stringValue
        let (record, roles) = try await service.memberRoles(cid)
        if !record.transient, !roles.contains(where: { $0.0 == clientID }) {
            throw IMError(.conversationMembershipRequired, "only members of \(cid) may read its member info")
        }
        let results: [JSONValue] = roles.filter { onlyClient == nil || $0.0 == onlyClient }.map { member, role in
            .object([
                "objectId": .string("\(cid):\(member)"), "cid": .string(cid), "clientId": .string(member),
                "role": .string(role.rawValue),
            ])
        }
        return HTTPJSON.response(.ok, ["results": JSONValue.array(results)])
    }
}
