import Foundation
import HookbotTestSupport
import IMCore
import XCTest

/// A fan-out's frame is built once and written whole to every receiver's socket (`ServerFrame`, below NIO's
/// frame encoder): each member reads well-formed RFC 6455 frames (final, unmasked, the shortest length
/// encoding) holding the message, the same bytes for every member, and the bytes queued for them are all
/// counted as written once they are read.
final class FanOutFrameTests: XCTestCase {
    func testEveryMemberReadsTheSameWellFormedFrames() async throws {
        let server = try await startServer()
        let tom = try await server.login("Tom")
        let names = ["Jerry", "小明", "🐱-fan"]
        var sockets: [RawWebSocket] = []
        for name in names {
            let socket = try RawWebSocket(port: server.port)
            try socket.sendText(#"{"cmd":"session","op":"open","i":1,"peerId":"\#(name)"}"#)
            XCTAssertTrue(try socket.readUntil(timeout: 5) { String(decoding: $0, as: UTF8.self).contains("opened") })
            sockets.append(socket)
        }
        let cid = try await tom.startConversation(members: names, name: "猫和老鼠")
        // Frames with a one-byte, a two-byte and an eight-byte length (payloads around 125 and 65,535 bytes).
        let texts = [
            "你好 @Jerry 👋", String(repeating: "猫", count: 40), "ok", String(repeating: "鼠", count: 21_800), "再见 🎉",
        ]
        var ids: [String] = []
        for text in texts { ids.append(try required(try await tom.sendText(text, to: cid).uid)) }

        var framesOfMembers: [[[UInt8]]] = []
        for (socket, name) in zip(sockets, names) {
            var frames: [[UInt8]] = []
            XCTAssertTrue(
                try socket.readUntil(timeout: 10) { received in
                    frames = Self.frames(in: received).filter { String(decoding: $0, as: UTF8.self).contains(#""cmd":"direct""#) }
                    return frames.count >= texts.count
                }, "\(name) got all messages")
            XCTAssertEqual(frames.count, texts.count, name)
            for (frame, (text, id)) in zip(frames, zip(texts, ids)) {
                let direct = try JSONCommandCodec().decode(String(decoding: frame, as: UTF8.self))
                XCTAssertEqual(direct.id, id, name)
                XCTAssertEqual(direct.fromPeerId, "Tom", name)
                XCTAssertEqual(direct.text, text, name)
            }
            framesOfMembers.append(frames)
        }
        XCTAssertEqual(Set(framesOfMembers).count, 1, "every member got the same bytes")
        // Every byte queued for the members was counted as written (one promise per socket and flush).
        let deadline = ContinuousClock.now + .seconds(5)
        while server.server.queuedOutboundBytes > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        XCTAssertEqual(server.server.queuedOutboundBytes, 0)
    }

    /// A chat room's members get a burst of messages that the server commits in a few batches, so each socket
    /// is written several frames at once (copied into one buffer, except those too large to copy): every member
    /// reads every message once, in the order sent, as well-formed frames; a member who left the room, and one
    /// who disconnected, get none of the next burst while the others get all of it.
    func testAChatRoomBurstArrivesWholeAndInOrder() async throws {
        let server = try await startServer()
        let open = { (name: String) throws -> RawWebSocket in
            let socket = try RawWebSocket(port: server.port)
            var login = Command(cmd: .session, op: .open, i: 1)
            login.peerId = name
            try socket.sendText(JSONCommandCodec().encode(login))
            XCTAssertTrue(try socket.readUntil(timeout: 5, occurrences: 1, of: #""op":"opened""#), name)
            return socket
        }
        let host = try open("主持人")
        try host.sendText(#"{"cmd":"conv","op":"start","i":2,"transient":true,"attr":{"name":"大厅 🏮"}}"#)
        var started = ""
        XCTAssertTrue(
            try host.readUntil(timeout: 5) { received in
                started =
                    Self.frames(in: received).map { String(decoding: $0, as: UTF8.self) }.first { $0.contains(#""op":"started""#) } ?? ""
                return !started.isEmpty
            })
        let cid = try required(try JSONCommandCodec().decode(started).cid)
        let names = (0..<12).map { ["小明", "Jerry", "🐱-fan", "Ана"][$0 % 4] + "-\($0)" }
        var members: [RawWebSocket?] = []
        for name in names {
            let member = try open(name)
            try member.sendText(#"{"cmd":"conv","op":"join","i":2,"cid":"\#(cid)"}"#)
            XCTAssertTrue(try member.readUntil(timeout: 5, occurrences: 1, of: #""op":"added""#), name)
            members.append(member)
        }

        // Sent back to back: they arrive while the first commit is written, so later ones share batches. Every
        // seventh is about 21 KB, more than the server copies into one buffer.
        func burst(_ round: String, serial: Int, from sender: RawWebSocket) throws -> [String] {
            let texts = (0..<30).map { k in
                k % 7 == 3 ? "\(round) \(k) " + String(repeating: "猫", count: 7_000) : "\(round) 第\(k)条 @小明-0 你好 👋 \(k)"
            }
            for (k, text) in texts.enumerated() {
                var direct = Command(cmd: .direct, i: serial + k)
                direct.cid = cid
                direct.msg = text
                try sender.sendText(JSONCommandCodec().encode(direct))
            }
            return texts
        }
        /// The deliveries and message acks a socket received, in order, once there are `count` or `timeout` passed.
        func received(by socket: RawWebSocket, count: Int, timeout: Double = 10) throws -> [Command] {
            var commands: [Command] = []
            _ = try socket.readUntil(timeout: timeout) { received in
                commands = Self.frames(in: received).compactMap { frame in
                    let command = try? JSONCommandCodec().decode(String(decoding: frame, as: UTF8.self))
                    return command?.cmd == .direct || command?.uid != nil ? command : nil
                }
                return commands.count >= count
            }
            return commands
        }
        func messages(of socket: RawWebSocket, count: Int, _ name: String, timeout: Double = 10) throws -> [String] {
            try received(by: socket, count: count, timeout: timeout).compactMap { $0.cmd == .direct ? $0.msg : nil }
        }
        // The host and a member send at once: every member gets both senders' messages in one order (the commit
        // order), and each sender gets its acks where its messages fall in that order. On PostgreSQL a batch's acks
        // can reach its sender before an earlier batch's deliveries (batches commit as tasks there; so it was before
        // round 6 too, at b7027b4): there each sender's acks are checked to be complete, the deliveries' order in full.
        let first = try burst("一", serial: 10, from: host)
        let other = try burst("甲", serial: 10, from: try required(members[2]))
        let order = try received(by: try required(members[3]), count: 60).map(\.id)
        XCTAssertEqual(order.count, 60)
        func inOrder(_ commands: [Command], _ what: String) {
            let ids = commands.map { $0.cmd == .direct ? $0.id : $0.uid }
            guard TestDatabase.backend == .sqlite else {
                XCTAssertEqual(ids.count, order.count, what)
                XCTAssertEqual(Set(ids), Set(order), what)
                let delivered = commands.filter { $0.cmd == .direct }.map(\.id)
                XCTAssertEqual(delivered, order.filter { Set(delivered).contains($0) }, "\(what): deliveries in commit order")
                return
            }
            XCTAssertEqual(ids, order, what)
        }
        for (member, name) in zip(members, names) {
            let commands = try received(by: try required(member), count: 60)
            inOrder(commands, "\(name): every message once, acks in place")
            let texts = commands.compactMap { $0.cmd == .direct ? $0.msg : nil }
            XCTAssertEqual(texts.filter { first.contains($0) }, first, name)
            XCTAssertEqual(texts.filter { other.contains($0) }, name == names[2] ? [] : other, name)
        }
        let hostView = try received(by: host, count: 60)
        inOrder(hostView, "the host's acks where its messages fall")
        XCTAssertEqual(hostView.compactMap { $0.cmd == .direct ? $0.msg : nil }, other)

        // One member leaves the room, another disconnects: the next burst goes to the ten others only.
        let leaver = try required(members[0])
        try leaver.sendText(#"{"cmd":"conv","op":"remove","i":3,"cid":"\#(cid)","m":["\#(names[0])"]}"#)
        XCTAssertTrue(try leaver.readUntil(timeout: 5, occurrences: 1, of: #""op":"removed""#))
        members[1] = nil // closes its socket
        try await Task.sleep(for: .milliseconds(200))
        let second = try burst("二", serial: 100, from: host)
        for (member, name) in zip(members, names).dropFirst(2) {
            let texts = try messages(of: try required(member), count: 60 + second.count, name)
            XCTAssertEqual(Array(texts.dropFirst(name == names[2] ? 30 : 60)), second, name)
        }
        // (Read after the others got the whole burst: what went to the leaver would have gone with it.)
        XCTAssertEqual(try messages(of: leaver, count: 61, names[0], timeout: 0.5).count, 60, "who left gets nothing more")
        let deadline = ContinuousClock.now + .seconds(5)
        while server.server.queuedOutboundBytes > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        XCTAssertEqual(server.server.queuedOutboundBytes, 0, "every byte queued for the room was counted as written")
    }

    /// The payloads of the server's frames after the upgrade response in `bytes`; fails the test on a frame that
    /// is masked, not final, or whose length is not in its shortest form (RFC 6455 section 5.2).
    private static func frames(in bytes: [UInt8]) -> [[UInt8]] {
        guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound else { return [] }
        var frames: [[UInt8]] = []
        var at = end
        while at + 2 <= bytes.count {
            XCTAssertEqual(bytes[at] & 0x80, 0x80, "FIN")
            XCTAssertEqual(bytes[at + 1] & 0x80, 0, "a server's frames are not masked")
            var length = Int(bytes[at + 1] & 0x7F)
            var header = 2
            if length == 126 {
                guard at + 4 <= bytes.count else { break }
                length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
                header = 4
                XCTAssertGreaterThan(length, 125, "shortest length encoding")
            } else if length == 127 {
                guard at + 10 <= bytes.count else { break }
                length = bytes[at + 2..<at + 10].reduce(0) { $0 << 8 | Int($1) }
                header = 10
                XCTAssertGreaterThan(length, 0xFFFF, "shortest length encoding")
            }
            guard at + header + length <= bytes.count else { break }
            if bytes[at] & 0x0F == 1 { frames.append(Array(bytes[at + header..<at + header + length])) }
            at += header + length
        }
        return frames
    }
}
