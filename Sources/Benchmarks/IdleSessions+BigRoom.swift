import ChildProcesses
import Foundation
import IMCore
import NIOCore
import NIOPosix
import Synchronization

/// The `w4` workload's result: one chat room, many online members, every message delivered to each.
struct BigRoomResult: Encodable {
    var members: Int
    var messages: Int
    var deliveries: Int
    /// Deliveries that had not arrived when the workload gave up waiting (must be 0).
    var missing: Int
    /// Members whose connection closed before the end (must be 0).
    var closedMembers: Int
    /// Deliveries from the first send to the last delivery.
    var deliveriesPerSecond: Double
    /// From each send to its delivery, sampled on every 50th member.
    var latencyMs: LatencyStats
    /// The server process's CPU time (user + system) over the sends and deliveries, per delivery.
    var serverCPUMicrosPerDelivery: Double
}

/// One chat room (a transient conversation) of `members` online members, against a separate `hookbot server`
/// process: a speaker sends `messages` messages (at most 10 not yet delivered to every member), each delivered
/// to every member.
/// Members are the bare NIO clients of the idle workload; they count what they receive, and every 50th
/// member reads the send time the speaker wrote into the text.
struct BigRoomBenchmark {
    let root: URL
    let members: Int
    let messages: Int
    var addresses = 8

    func run() async throws -> BigRoomResult {
        _ = IdleSessionsBenchmark.raiseDescriptorLimit()
        let (process, port) = try IdleSessionsBenchmark.startServer(
            in: root.appendingPathComponent("w4"), perAddress: members / addresses + 64)
        defer {
            process.signal()
            _ = process.waitUntilExit()
        }
        let clients = IdleClients(group: MultiThreadedEventLoopGroup.singleton, port: port)
        defer { clients.closeAll() }

        // The speaker opens the room.
        let counts = RoomCounts()
        var speaker: (channel: any Channel, answer: String)?
        for _ in 0..<200 where speaker == nil {
            speaker = try? await clients.connect(
                id: "speaker", from: "127.0.0.1",
                then: [
                    .init(send: #"{"cmd":"conv","op":"start","i":2,"transient":true,"attr":{"name":"大厅 lobby"}}"#, until: #""started""#)
                ],
                received: { frame in if frame.readableBytesView.starts(with: Self.ackPrefix) { counts.acked.add(1, ordering: .relaxed) } })
            if speaker == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        guard let speaker, let cid = try? JSONCommandCodec().decode(speaker.answer).cid else {
            throw BenchError(message: "the speaker could not open a chat room on port \(port)")
        }

        // The members log in and join.
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            var inFlight = 0
            for index in 0..<members {
                if inFlight == 200 {
                    try await tasks.next()
                    inFlight -= 1
                }
                let sampled = index % 50 == 0
                tasks.addTask {
                    let member = try await clients.connect(
                        id: "member-\(index)", from: "127.0.0.\(2 + index % addresses)",
                        then: [.init(send: #"{"cmd":"conv","op":"join","i":2,"cid":"\#(cid)"}"#, until: #""added""#)],
                        received: { frame in
                            guard frame.readableBytesView.starts(with: Self.directPrefix) else { return }
                            counts.delivered.add(1, ordering: .relaxed)
                            let now = DispatchTime.now().uptimeNanoseconds
                            counts.lastDelivery.store(now, ordering: .relaxed)
                            if sampled, let sent = Self.sendTime(in: frame) {
                                counts.samples.withLock { $0.append(Double(now &- sent) / 1_000_000) }
                            }
                        })
                    member.channel.closeFuture.whenComplete { _ in counts.closed.add(1, ordering: .relaxed) }
                }
                inFlight += 1
            }
            try await tasks.waitForAll()
        }

        // The speaker talks; up to 100 messages unacknowledged.
        let cpuBefore = try Self.cpuTicks(process.processIdentifier)
        let started = DispatchTime.now().uptimeNanoseconds
        for k in 0..<messages {
            // At most 10 messages acknowledged but not yet delivered to every member: the room's backlog stays
            // bounded (an unbounded one measures the queue, and delays pongs past the server's ping timeout).
            while k - counts.acked.load(ordering: .relaxed) >= 10 || (k - 10) * members > counts.delivered.load(ordering: .relaxed) {
                try await Task.sleep(for: .microseconds(200))
            }
            let text = "第\(k)条 message \(k) t=\(DispatchTime.now().uptimeNanoseconds)"
            IdleClients.send(#"{"cmd":"direct","i":\#(k + 3),"cid":"\#(cid)","msg":"\#(text)"}"#, on: speaker.channel)
        }
        let expected = messages * members
        var seen = 0
        var quietSince = ContinuousClock.now
        while counts.delivered.load(ordering: .relaxed) < expected, ContinuousClock.now - quietSince < .seconds(30) {
            try await Task.sleep(for: .milliseconds(20))
            let now = counts.delivered.load(ordering: .relaxed)
            if now != seen { (seen, quietSince) = (now, .now) }
        }
        let cpuAfter = try Self.cpuTicks(process.processIdentifier)
        let deliveries = counts.delivered.load(ordering: .relaxed)
        let seconds = Double(counts.lastDelivery.load(ordering: .relaxed) &- started) / 1e9
        return BigRoomResult(
            members: members, messages: messages, deliveries: deliveries, missing: expected - deliveries,
            closedMembers: counts.closed.load(ordering: .relaxed),
            deliveriesPerSecond: (Double(deliveries) / max(seconds, 0.001)).rounded(),
            latencyMs: LatencyStats(counts.samples.withLock { $0 }),
            serverCPUMicrosPerDelivery: IdleSessionsBenchmark.round(Double(cpuAfter - cpuBefore) * 10_000 / Double(max(deliveries, 1)), 2))
    }

    private static let ackPrefix = Array(#"{"cmd":"ack""#.utf8)
    private static let directPrefix = Array(#"{"cmd":"direct""#.utf8)

    /// The `t=` nanoseconds the speaker wrote into a message.
    static func sendTime(in frame: ByteBuffer) -> UInt64? {
        let bytes = frame.readableBytesView
        guard let marker = bytes.firstRange(of: Array("t=".utf8)) else { return nil }
        var value: UInt64 = 0
        for byte in bytes[marker.upperBound...] {
            guard byte >= 48, byte <= 57 else { break }
            value = value &* 10 &+ UInt64(byte - 48)
        }
        return value
    }

    /// User + system CPU time of process `pid`, in clock ticks (1/100 s).
    static func cpuTicks(_ pid: Int32) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The fields after the command name (which may hold spaces) start after its closing parenthesis.
        guard let close = stat.lastIndex(of: ")") else { throw BenchError(message: "unreadable /proc/\(pid)/stat") }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else {
            throw BenchError(message: "unreadable /proc/\(pid)/stat")
        }
        return user + system
    }
}

/// What the room's clients count, from NIO's threads.
private final class RoomCounts: Sendable {
    let acked = Atomic<Int>(0)
    let delivered = Atomic<Int>(0)
    /// When the last delivery arrived (`DispatchTime` nanoseconds).
    let lastDelivery = Atomic<UInt64>(0)
    let samples = Mutex<[Double]>([])
    /// Members whose connection closed during the run.
    let closed = Atomic<Int>(0)
}
