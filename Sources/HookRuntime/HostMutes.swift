/// The host's record of mutes (`MuteList` in BotRouting writes it): under the host's own state namespace,
/// key `mute:<cid>:<user>`, value the end of the mute (seconds since 1970).
enum HostMutes {
    static func prefix(_ cid: String) -> String { "mute:\(cid):" }
}

/// The host's record of conversation roles (the bot host mirrors them from the server): under the host's
/// own state namespace, key `convrole:<cid>:<user>`, value `Owner` or `Manager`. A command with
/// `roles = {"manager"}` may be run by a conversation's managers and owner, `{"owner"}` by its owner.
public enum ConversationRoles {
    public static func key(_ cid: String, _ user: String) -> String { "convrole:\(cid):\(user)" }
}
