import Foundation
import IMCore

/// One control a conversation keeps on a client: a mute ("shut-up", optionally until a time), an
/// exemption from a conversation-wide mute, a block, or a role.
struct MemberControl: Sendable, Equatable {
    enum Kind: String, Sendable, CaseIterable {
        /// Muted; `clientID` `*` mutes the whole conversation.
        case mute
        /// May speak while the whole conversation is muted.
        case unmute
        /// Removed and kept out.
        case block
        /// A role other than the default (`value`: `Manager`).
        case role
    }

    /// The client id a conversation-wide mute is stored under (no client id has a `*`).
    static let everyone = "*"

    var kind: Kind
    var clientID: String
    /// The role of a `role` control; the reason of a mute.
    var value: String?
    /// When a mute ends by itself (ms); nil: when lifted.
    var until: Int64?
    var by: String
    var at: Int64

    /// Whether the control is in force at `now` (a timed mute expires by itself: no process has to lift it).
    func inForce(at now: Int64) -> Bool { until.map { $0 > now } ?? true }
}

/// The role of a member of a conversation: its creator is the owner, managers are named by the owner,
/// everybody else is a member. Configured interceptors (the bot) act as managers everywhere.
enum MemberRole: String, Sendable, Comparable {
    case owner = "Owner"
    case manager = "Manager"
    case member = "Member"

    private var rank: Int {
        switch self {
        case .owner: 2
        case .manager: 1
        case .member: 0
        }
    }

    static func < (lhs: MemberRole, rhs: MemberRole) -> Bool { lhs.rank < rhs.rank }
}

/// What a conversation's controls say, evaluated at one instant.
struct MemberControls: Sendable {
    var controls: [MemberControl]
    var now: Int64

    static let none = MemberControls(controls: [], now: 0)

    private func has(_ kind: MemberControl.Kind, _ clientID: String) -> MemberControl? {
        controls.first { $0.kind == kind && $0.clientID == clientID && $0.inForce(at: now) }
    }

    func isBlocked(_ clientID: String) -> Bool { has(.block, clientID) != nil }
    var blocked: [String] { controls.filter { $0.kind == .block }.map(\.clientID) }
    /// Whether the whole conversation is muted.
    var allMuted: Bool { has(.mute, MemberControl.everyone) != nil }
    /// Members muted by name and still muted (not `*`).
    var muted: [MemberControl] { controls.filter { $0.kind == .mute && $0.clientID != MemberControl.everyone && $0.inForce(at: now) } }
    /// Members exempted from a conversation-wide mute.
    var exempted: [String] { controls.filter { $0.kind == .unmute }.map(\.clientID) }

    func role(of clientID: String, in record: ConversationRecord) -> MemberRole {
        if clientID == record.creator { return .owner }
        return has(.role, clientID)?.value.flatMap(MemberRole.init(rawValue:)) ?? .member
    }

    /// `clientID`'s own mute (by name), if any.
    func ownMute(of clientID: String) -> MemberControl? { has(.mute, clientID) }

    /// The mute that keeps `clientID` from sending, if any (owner and managers are never muted by a
    /// conversation-wide mute).
    func mute(of clientID: String, in record: ConversationRecord) -> MemberControl? {
        if let own = has(.mute, clientID) { return own }
        guard let all = has(.mute, MemberControl.everyone), role(of: clientID, in: record) == .member,
            has(.unmute, clientID) == nil
        else { return nil }
        return all
    }
}

/// The store side of mutes, block lists and roles (both stores, in `member_controls`).
protocol MemberControlStore: Sendable {
    /// Sets (`on`) or clears the controls of `kind` on `clientIDs`, in one transaction; returns the ids
    /// whose control was set or cleared.
    func setMemberControls(
        cid: String, kind: MemberControl.Kind, clientIDs: [String], on: Bool, value: String?, until: Int64?, by: String, now: Int64
    ) async throws -> [String]
    /// The conversation's controls (timed mutes that ended are left out).
    func memberControls(cid: String, now: Int64) async throws -> [MemberControl]
}

extension StoreRules {
    /// Whether `actor` (with `actorRole`) may mute, block or change the role of `target`: owners and
    /// managers may act on members, owners on managers too; nobody acts on the owner.
    static func authorizeModeration(
        _ action: String, cid: String, actor: String, actorRole: MemberRole, targets: [(String, MemberRole)]
    ) throws {
        guard actorRole >= .manager else {
            throw IMError(.conversationNotAllowed, "only the owner or a manager of \(cid) may \(action) members (\(actor) is a member)")
        }
        for (target, role) in targets where target != actor && role >= actorRole {
            throw IMError(
                .conversationNotAllowed, "\(actor) (\(actorRole.rawValue)) may not \(action) \(target) (\(role.rawValue)) in \(cid)")
        }
    }
}
