import CLua
import Foundation
import IMCore
import Logging
import LuaSandbox

/// What every plugin instance of one runtime shares. Used on the runtime's Lua thread only.
final class PluginEnvironment {
    let store: HookStateStore
    let clock: HookClock
    let registry = TypeRegistry()
    let commands = ChatCommandRegistry()
    let logger: Logger
    let limits: HookLimits
    let directory: URL
    /// The client id of the bot the plugins run in (`ctx.bot`), when the host knows it.
    let botID: String?
    /// Where actions may be aimed besides the current event's conversation; nil: anywhere.
    let reach: ConversationReach?
    /// The members of the bot's conversations as the host knows them (`ctx.conv(cid).member`, `locked`).
    let members: ConversationMembers
    /// Where a configuration key is set in the host's configuration file, for errors.
    let configLocator: ConfigLocator?
    let commandSettings: ChatCommandSettings
    /// What each plugin may reach over HTTP, and how calls are started (set by `PluginRuntime`; nil: none).
    let httpPolicies: [String: HTTPPolicy]
    var startHTTP: (@Sendable (HookHTTPCall) -> Void)?
    /// Whom hooks that may wait in `ctx.ask` can ask during the current event (set by the engine).
    @exclusivity(unchecked) var askTarget: DialogTarget?
    var nextHTTPID = 0
    /// Stored files (`msg.file`, `ctx.media`): the source the host set, and the records seen.
    let media = MediaAccess()
    /// Persisted `ctx.schedule` jobs of every plugin (PluginEngine+Schedules.swift).
    let schedules = ScheduleBook()
    /// The default locale and the current event's member, for `ctx.t` (LocaleLua.swift).
    let locale = LocaleContext()

    init(
        store: HookStateStore, clock: HookClock, logger: Logger, limits: HookLimits, directory: URL, botID: String? = nil,
        reach: ConversationReach? = nil, members: ConversationMembers = ConversationMembers(), configLocator: ConfigLocator? = nil,
        commandSettings: ChatCommandSettings = .init(), httpPolicies: [String: HTTPPolicy] = [:]
    ) {
        self.members = members
        self.httpPolicies = httpPolicies
        self.store = store
        self.clock = clock
        self.logger = logger
        self.limits = limits
        self.directory = directory
        self.botID = botID
        self.reach = reach
        self.configLocator = configLocator
        self.commandSettings = commandSettings
    }
}

struct PluginTimer {
    var id: Int
    var due: Double
    var interval: Double?
}

let maxActionsPerCall = 1000
let maxTimersPerPlugin = 1000
let maxStateKeyBytes = 1024
