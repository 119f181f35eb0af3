/// The host's record of mutes (`MuteList` in BotRouting writes it): under the host's own state namespace,
/// key `mute:<cid>:<user>`, value the end of the mute (seconds since 1970).
enum HostMutes {
    static func prefix(_ cid: String) -> String { "mute:\(cid):" }
}
