import BotHost
import Foundation
import HookRuntime
import IMCore
import IMServer

/// The JSON shapes of the admin API (docs/CONSOLE.md, "Admin API").
struct PluginView: Encodable {
    struct ErrorView: Encodable {
        var hook: String
        var source: String?
        var line: Int?
        var reason: String
        var description: String

        init(_ error: HookError) {
            hook = error.hook
            source = error.source
            line = error.line
            reason = error.message
            description = error.description
        }
    }

    struct HookView: Encodable {
        var name: String
        var calls: Int
        var failures: Int
        var totalMillis: Double
        var maxMillis: Double
    }

    var name: String
    var path: String
    var state: String
    var disabledBy: String?
    var priority: Int
    var generation: Int
    var timers: Int
    var memoryBytes: Int
    var consecutiveFailures: Int
    var totalFailures: Int
    var breakerTrips: Int
    /// `ctx.http` calls: started, failed, refused by the policy, in flight.
    var http: [String: Int]
    var lastError: ErrorView?
    /// Every hook the plugin defines, with its usage (zero when never called).
    var hooks: [HookView]

    init(_ status: PluginStatus) {
        name = status.name
        path = status.path
        state = status.state.rawValue
        disabledBy = status.disabledBy?.rawValue
        priority = status.priority
        generation = status.generation
        timers = status.timers
        memoryBytes = status.memoryBytes
        consecutiveFailures = status.consecutiveFailures
        totalFailures = status.totalFailures
        breakerTrips = status.breakerTrips
        http = [
            "started": status.http.started, "failed": status.http.failed, "refused": status.http.refused,
            "inFlight": status.http.inFlight,
        ]
        lastError = status.lastError.map(ErrorView.init)
        let used = Dictionary(status.usage.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let names = status.hooks + status.usage.map(\.name).filter { !status.hooks.contains($0) }
        hooks = names.map { name in
            let usage = used[name]
            return HookView(
                name: name, calls: usage?.calls ?? 0, failures: usage?.failures ?? 0,
                totalMillis: usage?.totalMillis ?? 0, maxMillis: usage?.maxMillis ?? 0)
        }
    }
}

struct ReloadView: Encodable {
    var loaded: [String]
    var reloaded: [String]
    var unloaded: [String]
    var errors: [PluginView.ErrorView]

    init(_ report: ReloadReport) {
        loaded = report.loaded
        reloaded = report.reloaded
        unloaded = report.unloaded
        errors = report.errors.map(PluginView.ErrorView.init)
    }
}

struct StateView: Encodable {
    struct EntryView: Encodable {
        var key: String
        var value: JSONValue
        var expiresAt: Double?
    }

    var plugin: String
    var entries: [EntryView]
}

struct LogView: Encodable {
    struct EntryView: Encodable {
        var seq: Int
        var time: Double
        var level: String
        var message: String
        var plugin: String?
        var metadata: [String: String]

        init(_ entry: LogBuffer.Entry) {
            seq = entry.seq
            time = entry.time
            level = entry.level.rawValue
            message = entry.message
            plugin = entry.plugin
            metadata = entry.metadata
        }
    }

    var entries: [EntryView]
    var next: Int
}

struct InterceptionView: Encodable {
    struct Verdicts: Encodable {
        var allow: Int
        var block: Int
        var replace: Int
    }

    struct PolicyDecisions: Encodable {
        var total: Int
        var declined: Int
        var invalid: Int
    }

    struct Bot: Encodable {
        var verdicts: Int
        var undecided: Int
        var blocked: Int
    }

    var interceptor: String
    var attached: Bool?
    var deadlineMillis: Int
    var policy: String
    var requests: Int?
    var verdicts: Verdicts?
    var timeouts: Int?
    var policyDecisions: PolicyDecisions?
    var reviewsInFlight: Int?
    var bot: Bot
}

struct InfoView: Encodable {
    var bot: String?
    var lobby: String?
    var lobbyName: String
    var ws: String
    var signatures: Bool
    var appId: String?
}

struct TypeView: Encodable {
    struct Field: Encodable {
        var type: String
        var optional: Bool
    }

    var name: String
    var type: Int
    var plugin: String
    var fields: [String: Field]

    init(_ type: CustomMessageType) {
        name = type.name
        self.type = type.number
        plugin = type.plugin
        fields = type.fields.mapValues { Field(type: $0.type.rawValue, optional: $0.optional) }
    }
}

struct SignRequest: Decodable {
    var clientId: String
    var action: String
    var conversationId: String?
    var members: [String]?
}

struct SignView: Encodable {
    var signature: String
    var timestamp: Int64
    var nonce: String
}

/// `GET /api/pushes`: the embedded server's last pushes (oldest first) and its attempts per provider and outcome.
struct PushesView: Encodable {
    var enabled: Bool
    var reason: String?
    var entries: [PushHistoryEntry]
    var next: Int
    var providers: [String: [String: Int]]
}
