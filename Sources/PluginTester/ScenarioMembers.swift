import Foundation
import HookRuntime
import IMCore

/// The members a scenario's bots know before its steps run (`members = { [cid] = { [uid] = {…} } }` at the
/// top of the file or in a case), what `ctx.conv(cid).member(uid)` answers as a running bot learns it from
/// the server: each member's join time (`ago`: seconds before the case starts, or `at`: a time on the
/// scenario's clock, which starts at 1700000000), `role` (`owner`, `manager`, `member`), `messages` (sent
/// so far) and `founder`. A member may be given as a bare name in a list (joined when the case starts).
struct ScenarioMembers: Sendable {
    /// Per conversation, per member: the fields above.
    var conversations: [String: [String: JSONValue]] = [:]

    static let memberKeys = ["ago", "at", "role", "messages", "founder", "locale"]

    init() {}

    init(_ value: JSONValue?, at location: String) throws {
        guard let value else { return }
        guard let table = Scenario.objectOrEmpty(value) else {
            throw ScenarioError("\(location): members must be a table { [cid] = { [uid] = {...} } }")
        }
        for (cid, list) in table {
            var members: [String: JSONValue] = [:]
            if case .array(let names) = list {
                for name in names {
                    guard let name = name.stringValue else { throw ScenarioError("\(location).\(cid): a member must be a name") }
                    members[name] = .object([:])
                }
            } else if let byName = list.objectValue {
                for (uid, spec) in byName {
                    guard let fields = Scenario.objectOrEmpty(spec) else {
                        throw ScenarioError("\(location).\(cid).\(uid) must be a table {ago = …, role = …, messages = …}")
                    }
                    try Scenario.checkKeys(fields, allowed: Self.memberKeys, at: "\(location).\(cid).\(uid)")
                    if let role = fields["role"], !["owner", "manager", "member"].contains(role.stringValue ?? "") {
                        throw ScenarioError("\(location).\(cid).\(uid).role must be \"owner\", \"manager\" or \"member\"")
                    }
                    if let locale = fields["locale"], locale.stringValue.flatMap(LocaleTag.normalise) == nil {
                        throw ScenarioError("\(location).\(cid).\(uid).locale must be a locale tag (en, zh-CN …)")
                    }
                    for key in ["ago", "at", "messages"] where fields[key] != nil && fields[key]?.doubleValue == nil {
                        throw ScenarioError("\(location).\(cid).\(uid).\(key) must be a number")
                    }
                    members[uid] = .object(fields)
                }
            } else {
                throw ScenarioError("\(location).\(cid) must be a list of names or a table { [uid] = {...} }")
            }
            conversations[cid] = members
        }
    }

    /// These members merged over `base` (a case's over the file's), conversation by conversation.
    func merged(over base: ScenarioMembers) -> ScenarioMembers {
        var result = base
        for (cid, members) in conversations { result.conversations[cid] = members }
        return result
    }

    /// Gives a bot's runtime these members, as of `now` on the scenario's clock, and their language
    /// choices (`locale = "zh-CN"`: as if they had said `!lang zh-CN`) to its state.
    func install(in members: ConversationMembers, store: HookStateStore, now: Double) throws {
        for (cid, list) in conversations {
            for (uid, spec) in list {
                if let tag = spec.objectValue?["locale"]?.stringValue.flatMap(LocaleTag.normalise) {
                    try LocaleChoices.set(user: uid, to: tag, in: store, now: now)
                }
            }
            var known: [String: MemberInfo] = [:]
            for (uid, spec) in list {
                let fields = spec.objectValue ?? [:]
                let joinedAt = fields["at"]?.doubleValue ?? (now - (fields["ago"]?.doubleValue ?? 0))
                known[uid] = MemberInfo(
                    joinedAt: joinedAt, role: fields["role"]?.stringValue ?? "member",
                    messages: fields["messages"]?.intValue ?? 0, founder: fields["founder"]?.boolValue == true)
            }
            members.replace(cid, members: known, locked: false)
        }
    }

    /// Before a `join` step: the joiners' join time when the step gives `at` or `ago` (the event records
    /// the clock's time otherwise).
    static func preset(_ step: [String: JSONValue], members joiners: [String], cid: String, in members: ConversationMembers, now: Double) {
        guard step["at"] != nil || step["ago"] != nil else { return }
        let time = step["at"]?.doubleValue ?? (now - (step["ago"]?.doubleValue ?? 0))
        members.joined(joiners, in: cid, at: time, founding: step["founding"]?.boolValue == true)
    }
}
