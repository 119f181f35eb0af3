import BotHost
import Foundation
import HookRuntime
import IMCore
import IMServer

/// The JSON shapes of the admin API (docs/CONSOLE.md, "Admin API"); those the admin socket gives too
/// (`PluginView`, `ReloadView`) are in BotHost (AdminViews.swift).
struct StateView: Encodable {
    var plugin: String
    var entries: [HookStateStore.Entry]
}

struct LogView: Encodable {
    var entries: [LogBuffer.Entry]
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
