import Foundation
import HookRuntime
import IMCore

/// Answers a scenario's plugins' `ctx.http` calls from the responses the scenario recorded, and lists
/// every call in the step's outcome (`http`: method, url, plugin, body and `json` when it parses, status
/// or error). A call nothing was recorded for fails like an unreachable
/// service would; a recorded body over the plugin's size cap fails as "too large", as in a running bot.
/// A recorded 3xx with a `location` is one exchange: redirects are followed (or refused) by the same
/// `HookHTTPTransport.perform` as in a running bot, each hop answered from its own recording.
struct RecordedHTTP: HookHTTPTransport {
    let recordings: [String: HookHTTPOutcome]
    let recorder: StepRecorder

    /// The host (or host:port) a recording's `"METHOD url"` key names.
    static func host(of key: String) -> String? {
        guard let url = key.split(separator: " ", maxSplits: 1).last.flatMap({ URL(string: String($0)) }),
            let host = url.host?.lowercased()
        else { return nil }
        return url.port.map { "\(host):\($0)" } ?? host
    }

    func exchange(_ call: HookHTTPCall) async -> HookHTTPOutcome {
        let key = "\(call.method) \(call.url.absoluteString)"
        var outcome = recordings[key] ?? HookHTTPOutcome(error: "failed: no response recorded for \(key)")
        if outcome.error == nil, outcome.body.utf8.count > call.maxBytes {
            outcome = HookHTTPOutcome(status: outcome.status, error: "too large: the response is over \(call.maxBytes) bytes")
        }
        var entry: [String: JSONValue] = [
            "method": .string(call.method), "url": .string(call.url.absoluteString),
            "plugin": .string(call.plugin),
        ]
        if let body = call.body {
            entry["body"] = .string(body)
            if let json = try? JSONValue(parsing: body) { entry["json"] = json }
        }
        if let status = outcome.status { entry["status"] = .int(status) }
        if let error = outcome.error { entry["error"] = .string(error) }
        recorder.http(.object(entry))
        return outcome
    }
}
