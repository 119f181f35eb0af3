import Foundation

/// Keeps bots from talking to each other forever: counts the bot's own messages per conversation in a
/// sliding window, and reads the hop count that every bot message carries in its attributes.
struct LoopGuard {
    /// The attribute key carrying how many bot replies led to a message.
    static let hopKey = "hookbot.hop"

    let limit: Int
    let window: Double
    let maxHops: Int
    private var sent: [String: [Double]] = [:]

    init(limit: Int, window: Double, maxHops: Int) {
        self.limit = limit
        self.window = window
        self.maxHops = maxHops
    }

    /// Whether a message with this hop count may still be answered.
    func mayAnswer(hops: Int) -> Bool { hops < maxHops }

    /// Records a send in `cid` at `now` if the rate allows it.
    mutating func allowSend(in cid: String, now: Double) -> Bool {
        var times = sent[cid, default: []].filter { now - $0 < window }
        guard times.count < limit else {
            sent[cid] = times
            return false
        }
        times.append(now)
        sent[cid] = times
        return true
    }
}
