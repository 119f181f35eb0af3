import BotHost
import Foundation
import HookRuntime
import Hummingbird
import IMCore
import IMServer

/// `GET /api/schedules`: every plugin's `ctx.schedule` jobs; `DELETE /api/schedules/:plugin/:id` cancels one.
struct ScheduleListView: Codable, Sendable {
    struct Job: Codable, Sendable {
        var id: String
        var kind: String
        var spec: String
        var fn: String
        var data: JSONValue
        var tz: String
        var missed: String
        var next: Double
        var runs: Int
        var lastRun: Double?
        var created: Double
    }
    struct Plugin: Codable, Sendable {
        var plugin: String
        var loaded: Bool
        var jobs: [Job]
    }
    var plugins: [Plugin]
    var total: Int
}

extension Console {
    func registerSchedules(on router: Router<BasicRequestContext>) {
        router.get("/api/schedules") { [self] request, _ in
            await admin(request) { target in
                let all = await target.bot.runtime.schedules()
                let plugins = all.map { p in
                    ScheduleListView.Plugin(
                        plugin: p.plugin, loaded: p.loaded,
                        jobs: p.jobs.map {
                            .init(
                                id: $0.id, kind: $0.kind.rawValue, spec: $0.spec, fn: $0.fn, data: $0.data, tz: $0.tz,
                                missed: $0.missed.rawValue, next: $0.due, runs: $0.runs, lastRun: $0.lastRun,
                                created: $0.created)
                        })
                }
                return HTTPJSON.response(.ok, ScheduleListView(plugins: plugins, total: plugins.reduce(0) { $0 + $1.jobs.count }))
            }
        }
        router.delete("/api/schedules/:plugin/:id") { [self] request, context in
            await admin(request) { target in
                guard let plugin = context.parameters.get("plugin")?.removingPercentEncoding,
                    let id = context.parameters.get("id")?.removingPercentEncoding
                else { return HTTPJSON.error(.badRequest, "the plugin or id is not percent-encoded correctly") }
                do {
                    guard try await target.bot.runtime.cancelSchedule(plugin: plugin, id: id) else {
                        return HTTPJSON.error(.notFound, "plugin \(plugin) has no schedule \(id)")
                    }
                    return HTTPJSON.response(.ok, ["cancelled": true])
                } catch {
                    return HTTPJSON.error(.internalServerError, "the schedule could not be cancelled: \(error)")
                }
            }
        }
    }
}
