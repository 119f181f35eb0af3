import BotHost
import Foundation
import HookRuntime
import Hummingbird
import IMCore
import IMServer

/// `GET /api/schedules`: every plugin's `ctx.schedule` jobs; `DELETE /api/schedules/:plugin/:id` cancels one.
struct ScheduleListView: Encodable, Sendable {
    /// A job as the state file keeps it (`ScheduleJob`'s own JSON), and `next`: when it is due.
    struct Job: Encodable, Sendable {
        var job: ScheduleJob

        private enum Keys: String, CodingKey { case next }

        func encode(to encoder: any Encoder) throws {
            try job.encode(to: encoder)
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(job.due, forKey: .next)
        }
    }
    struct Plugin: Encodable, Sendable {
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
                        jobs: p.jobs.map(ScheduleListView.Job.init))
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
