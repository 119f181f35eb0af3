import BotHost
import Foundation
import HookRuntime
import Hummingbird
import IMServer

/// The message trace endpoints (docs/CONSOLE.md "Message trace"): the paths the last messages took
/// through the bot, kept in memory by its `MessageTraceStore`.
extension Console {
    func registerTrace(on router: Router<BasicRequestContext>) {
        router.get("/api/trace") { [self] request, _ in
            await admin(request) { target in Self.traces(request, target.bot.traces) }
        }
        router.get("/api/trace/:id") { [self] request, context in
            await admin(request) { target in
                let id = context.parameters.get("id")?.removingPercentEncoding ?? ""
                guard let trace = target.bot.traces.trace(id) else {
                    return HTTPJSON.error(
                        .notFound,
                        "no trace for \(id): only the last \(target.bot.traces.capacity) messages are kept (a message id, or a trace's number)"
                    )
                }
                return HTTPJSON.response(.ok, trace)
            }
        }
    }

    /// `GET /api/trace?limit=&blocked=1&verdicts=1&cid=`: the newest traces first.
    private static func traces(_ request: Request, _ store: MessageTraceStore) -> Response {
        let query = request.uri.queryParameters
        var limit = 50
        if let value = query.get("limit") {
            let most = max(1, store.capacity)
            guard let number = Int(value), (1...most).contains(number) else {
                return HTTPJSON.error(.badRequest, "limit must be between 1 and \(most)")
            }
            limit = number
        }
        func flag(_ name: String) -> Bool? {
            switch query.get(name) {
            case nil, "0", "false": false
            case "1", "true": true
            default: nil
            }
        }
        guard let blocked = flag("blocked"), let verdicts = flag("verdicts") else {
            return HTTPJSON.error(.badRequest, "blocked and verdicts must be 1 or 0")
        }
        let cid = query.get("cid").flatMap { $0.isEmpty ? nil : $0 }
        let traces = store.recent(limit: limit, blockedOnly: blocked, withVerdict: verdicts, cid: cid)
        return HTTPJSON.response(.ok, TraceListView(capacity: store.capacity, traces: traces))
    }
}

/// `GET /api/trace`'s answer.
struct TraceListView: Encodable {
    /// How many traces the bot keeps.
    var capacity: Int
    var traces: [MessageTrace.Snapshot]
}
