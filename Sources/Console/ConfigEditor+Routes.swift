import Foundation
import Hummingbird
import IMServer

extension Console {
    /// `GET /api/moderation/actions`, `POST /api/moderation/actions/{id}/undo`, and
    /// `GET`/`PUT /api/plugins/{name}/config` (docs/CONSOLE.md).
    func registerModerationAndConfig(on router: Router<BasicRequestContext>) {
        router.get("/api/moderation/actions") { [self] request, _ in
            await admin(request) { target in await moderation.list(request, target.bot.runtime) }
        }
        router.post("/api/moderation/actions/:id/undo") { [self] request, context in
            await admin(request) { target in
                let id = context.parameters.get("id")?.removingPercentEncoding ?? ""
                return await moderation.undo(id: id, target, logs: logs)
            }
        }
        router.get("/api/plugins/:name/config") { [self] request, context in
            await plugin(request, context) { target, name in
                var response = await configEditor.view(target.bot, plugin: name)
                if response.status == .ok, let version = await configEditor.currentVersion(name) {
                    response.headers[.eTag] = "\"\(version)\""
                }
                return response
            }
        }
        router.put("/api/plugins/:name/config") { [self] request, context in
            await plugin(request, context) { target, name in
                let body: Data
                do {
                    body = Data(buffer: try await request.body.collect(upTo: ConfigEditor.maxBody))
                } catch {
                    return HTTPJSON.error(.contentTooLarge, "a change is at most \(ConfigEditor.maxBody) bytes")
                }
                return await configEditor.change(target.bot, plugin: name, body: body, ifMatch: request.headers[.ifMatch])
            }
        }
    }
}
