import Foundation

/// Keeps bots from talking to each other forever, and plugins from flooding: counts the bot's own
/// messages per conversation and across all conversations in a sliding window, and reads the hop count
/// that every bot message carries in its attributes.
///
/// Each conversation keeps only the send times still inside the window (at most `limit` of them), so a
/// check costs O(1) amortised, and conversations that went quiet are forgotten.
public struct LoopGuard: Sendable {
    /// The attribute key carrying how many bot replies led to a message.
    public static let hopKey = "hookbot.hop"

    let limit: Int
    /// Most messages in all conversations together per window.
    let globalLimit: Int
    let window: Double
    let maxHops: Int
    private var sent: [String: SendTimes] = [:]
    private var sentAnywhere = SendTimes()
    private var checksSincePurge = 0

    init(limit: Int, globalLimit: Int = .max, window: Double, maxHops: Int) {
        self.limit = limit
        self.globalLimit = globalLimit
        self.window = window
        self.maxHops = maxHops
    }

    /// Whether a message with this hop count may still be answered.
    func mayAnswer(hops: Int) -> Bool { hops < maxHops }

    /// Number of conversations with sends inside the window (for tests and stats).
    var trackedConversations: Int { sent.count }

    /// Records a send in `cid` at `now` if the rate allows it.
    mutating func allowSend(in cid: String, now: Double) -> Bool {
        purgeIfDue(now: now)
        var times = sent.removeValue(forKey: cid) ?? SendTimes()
        times.dropOlder(than: now - window)
        sentAnywhere.dropOlder(than: now - window)
        let allowed = times.count < limit && sentAnywhere.count < globalLimit
        if allowed {
            times.append(now)
            sentAnywhere.append(now)
        }
        sent[cid] = times
        return allowed
    }

    /// Every so often, forgets conversations whose last send has left the window (amortised O(1)).
    private mutating func purgeIfDue(now: Double) {
        checksSincePurge += 1
        guard checksSincePurge >= max(64, sent.count) else { return }
        checksSincePurge = 0
        let horizon = now - window
        sent = sent.filter { ($0.value.newest ?? -.infinity) > horizon }
    }
}

/// Send times in increasing order, oldest first; dropping from the front is O(1) amortised.
private struct SendTimes: Sendable {
    private var times: [Double] = []
    private var head = 0

    var count: Int { times.count - head }
    var newest: Double? { times.last }

    mutating func append(_ time: Double) { times.append(time) }

    mutating func dropOlder(than horizon: Double) {
        while head < times.count, times[head] <= horizon { head += 1 }
        if head > 32, head * 2 > times.count {
            times.removeFirst(head)
            head = 0
        }
    }
}
