import CLua
import Foundation
import IMCore
import Logging

/// HTTP in and out: webhooks (`on_http`) and the callbacks of `ctx.http` calls.
extension PluginEngine {
    /// `on_http(req, ctx)` of one plugin, for a request to its webhook. Nil when there is no such enabled
    /// plugin with `on_http`. A failing hook answers 500; the actions it asked for before failing stand.
    public func http(plugin name: String, _ request: HookHTTPRequest) -> (response: HookHTTPResponse, result: HookResult)? {
        guard let plugin = ordered.first(where: { $0.name == name }), !plugin.disabled, plugin.has(.onHttp) else { return nil }
        var fields: [String: JSONValue] = [
            "method": .string(request.method), "path": .string(request.path), "body": .string(request.body),
            "query": .object(request.query.mapValues(JSONValue.string)),
            "headers": .object(request.headers.mapValues(JSONValue.string)),
        ]
        if let json = try? JSONValue(parsing: request.body) { fields["json"] = json }
        var response = HookHTTPResponse(status: 204)
        let result = call(plugin, cid: nil, messageID: nil) { plugin in
            if let error = plugin.invoke(.onHttp, pushJSON(.object(fields))) {
                response = HookHTTPResponse(status: 500, body: "the plugin failed: \(error.message)")
                return error
            }
            guard let L = plugin.L else { return nil }
            switch Self.httpResponse(L) {
            case .success(let answer): response = answer
            case .failure(let problem):
                response = HookHTTPResponse(status: 500, body: "on_http returned \(problem)")
                logger.error("on_http returned \(problem)", metadata: ["plugin": "\(name)"])
            }
            return nil
        }
        return (response, result)
    }

    /// The value `on_http` left on the stack, as a response.
    private static func httpResponse(_ L: LuaRef) -> Result<HookHTTPResponse, HTTPResponseProblem> {
        switch lua_type(L, -1) {
        case LUA_TNIL, LUA_TNONE: return .success(HookHTTPResponse(status: 204))
        case LUA_TSTRING: return .success(HookHTTPResponse(status: 200, body: luaString(L, -1) ?? ""))
        case LUA_TTABLE:
            guard let value = try? luaToJSON(L, -1, path: "response"), case .object(let fields) = value else {
                return .failure(HTTPResponseProblem("a table that is not {status, body, headers}"))
            }
            var response = HookHTTPResponse(status: 200)
            if let status = fields["status"] {
                guard let code = status.intValue, (200...599).contains(code) else {
                    return .failure(HTTPResponseProblem("a status that is not a number from 200 to 599"))
                }
                response.status = code
            }
            switch fields["body"] {
            case nil, .null?: break
            case .string(let text)?: response.body = text
            case let body?:
                response.body = body.jsonString()
                response.headers["content-type"] = "application/json"
            }
            for (key, value) in fields["headers"]?.objectValue ?? [:] {
                guard let text = value.stringValue else { return .failure(HTTPResponseProblem("a header that is not a string")) }
                response.headers[key.lowercased()] = text
            }
            return .success(response)
        default:
            return .failure(HTTPResponseProblem("a \(luaTypeName(L, -1)), not a table, a string or nil"))
        }
    }
}

struct HTTPResponseProblem: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension PluginEngine {
    /// How plugins' HTTP calls are started (`ctx.http`); without it they are refused.
    public func setHTTPStarter(_ start: (@Sendable (HookHTTPCall) -> Void)?) { env.startHTTP = start }

    /// Runs the callback of a finished HTTP call, with the ctx of the event that started it. A call whose
    /// plugin was reloaded, unloaded or disabled meanwhile has no callback to run.
    public func completeHTTP(_ call: HookHTTPCall, _ outcome: HookHTTPOutcome) -> HookResult {
        usage[call.plugin]?.httpFinished(failed: outcome.error != nil)
        guard let plugin = ordered.first(where: { $0.instanceID == call.instanceID }), !plugin.disabled else { return HookResult() }
        return self.call(plugin, cid: call.cid, messageID: call.messageID) { plugin in plugin.httpDone(call.id, outcome.lua) }
    }
}
