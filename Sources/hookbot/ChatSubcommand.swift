import ArgumentParser
import Foundation
import IMClient
import IMCore

struct ChatSubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chat", abstract: "A terminal chat client for trying bots by hand.",
        discussion: """
            Type a line to send it. Commands: /join <name or id>, /quit, /members, /history [n], \
            /cmd <action> [json object], /push <json object> <text>, /typing, /upload <path>, /exit. /push sends the text with \
            LeanCloud's pushData (what members who are offline get as a push notification). /upload sends a file as an image, audio, \
            video or file message (by the type the server sniffs), uploaded to the server's /media with progress.
            """)

    @Option(name: .customLong("as"), help: "Client id to log in as.") var clientId: String
    @Option(help: "Conversation name or id to join.") var conversation = "lobby"
    @Option(help: "Server WebSocket URL; defaults to ws://127.0.0.1:<port>/ws.") var server: String?
    @Option(help: "Port of a local server.") var port = 8080

    /// The "operation" type sent transiently by /typing (the LeanCloud guide's typing indicator).
    static let operationType = 1

    func run() async throws {
        let client = IMClient(clientId: clientId, options: IMClientOptions(url: server ?? "ws://127.0.0.1:\(port)/ws"))
        let events = client.events()
        try await client.open()
        var current = try await join(conversation, client: client)
        let base = client.mediaBaseURL
        let printer = Task { for await event in events { Self.show(event, me: clientId, mediaBase: base) } }
        say("Logged in as \(clientId) in \(current.name ?? current.id). /exit leaves.")
        for await line in Self.standardInputLines() {
            let text = line.trimmingCharacters(in: .whitespaces)
            guard !text.isEmpty else { continue }
            do {
                if text.hasPrefix("/") {
                    guard let next = try await command(text, in: current, client: client) else { break }
                    current = next
                } else {
                    _ = try await current.send(.text(text))
                }
            } catch {
                say("! \(error)")
            }
        }
        printer.cancel()
        await client.close()
    }

    /// Runs a slash command; nil means exit.
    private func command(_ text: String, in conversation: IMConversation, client: IMClient) async throws -> IMConversation? {
        let parts = text.split(separator: " ", maxSplits: 2).map(String.init)
        switch parts[0] {
        case "/exit":
            return nil
        case "/join" where parts.count > 1:
            let joined = try await join(parts[1...].joined(separator: " "), client: client)
            say("* now in \(joined.name ?? joined.id)")
            return joined
        case "/quit":
            try await conversation.quit()
            say("* left \(conversation.name ?? conversation.id)")
        case "/members":
            let fresh = try await conversation.fetch()
            say("* members: \((fresh?.members ?? []).joined(separator: ", "))")
        case "/history":
            let limit = parts.count > 1 ? Int(parts[1]) ?? 20 : 20
            for message in try await conversation.messages(limit: limit) { Self.show(message, mediaBase: client.mediaBaseURL) }
        case "/cmd" where parts.count > 1:
            var ext: [String: JSONValue] = [:]
            if parts.count > 2 {
                guard let object = JSONValue.parse(parts[2])?.objectValue else {
                    say("! /cmd takes a JSON object, e.g. /cmd poke {\"times\": 2}")
                    return conversation
                }
                ext = object
            }
            _ = try await conversation.sendCmd(action: parts[1], ext: ext)
            say("* sent cmd message \(parts[1]) \(JSONValue.object(ext).jsonString()) (not stored)")
        case "/push" where parts.count > 1:
            let rest = String(text.dropFirst("/push".count)).trimmingCharacters(in: .whitespaces)
            guard let (pushData, message) = Self.pushLine(rest) else {
                say(#"! /push takes a JSON object then the message, e.g. /push {"alert": "Tom needs you", "badge": 1} hello"#)
                return conversation
            }
            let sent = try await conversation.send(.text(message), options: IMSendOptions(pushData: pushData))
            say("* sent \"\(message)\" (\(sent.id)) with pushData \(pushData.encoded)")
        case "/typing":
            _ = try await conversation.send(.typed(TypedMessage(type: Self.operationType, text: "typing…")), options: .transient)
            say("* sent a transient \"typing…\" message (_lctype \(Self.operationType), not stored)")
        case "/upload" where parts.count > 1:
            let path = (String(text.dropFirst("/upload".count)).trimmingCharacters(in: .whitespaces) as NSString).expandingTildeInPath
            let file = URL(fileURLWithPath: path)
            let meter = UploadMeter(name: file.lastPathComponent, terminal: isatty(STDOUT_FILENO) == 1)
            let sent: IMMessage
            do {
                sent = try await conversation.sendFile(at: file) { meter.update($0) }
            } catch {
                meter.abandon()
                throw error
            }
            meter.finish()
            say("* " + sent.summary(mediaBase: client.mediaBaseURL))
        default:
            say(
                "! commands: /join <name or id>, /quit, /members, /history [n], /cmd <action> [json], /push <json> <text>, /typing, "
                    + "/upload <path>, /exit")
        }
        return conversation
    }

    /// `/push`'s argument: a JSON object (LeanCloud's pushData), then the message's text. Nil when it does not
    /// start with a JSON object or no text follows.
    static func pushLine(_ rest: String) -> (IMPushData, String)? {
        guard rest.hasPrefix("{") else { return nil }
        var end = rest.startIndex
        while let brace = rest[end...].firstIndex(of: "}") {
            end = rest.index(after: brace)
            let json = String(rest[..<end])
            guard JSONValue.parse(json)?.objectValue != nil, let pushData = try? IMPushData(json: json) else { continue }
            let message = rest[end...].trimmingCharacters(in: .whitespaces)
            return message.isEmpty ? nil : (pushData, message)
        }
        return nil
    }

    /// Joins a conversation given by id or by name.
    private func join(_ nameOrID: String, client: IMClient) async throws -> IMConversation {
        let byName = try await client.conversations(matching: IMConversationQuery().whereKey("name", equalTo: .string(nameOrID)))
        let conversation: IMConversation
        if let found = byName.first {
            conversation = found
        } else if let found = try await client.fetchConversation(id: nameOrID) {
            conversation = found
        } else {
            throw ValidationError("no conversation named or with id '\(nameOrID)'")
        }
        try await conversation.join()
        return conversation
    }

    private static func show(_ event: IMEvent, me: String, mediaBase: URL?) {
        switch event {
        case .message(let message) where message.from != me: show(message, mediaBase: mediaBase)
        case .cmd(let cmd): say("* \(cmd.from) /\(cmd.action) \(JSONValue.object(cmd.ext).jsonString())")
        case .membersJoined(_, let members, let by, _): say("* \(members.joined(separator: ", ")) joined (by \(by ?? "?"))")
        case .membersLeft(_, let members, let by): say("* \(members.joined(separator: ", ")) left (by \(by ?? "?"))")
        case .kicked(_, let by): say("* you were removed by \(by ?? "?")")
        case .recalled(let message): say("* \(message.from) recalled a message")
        case .conversationUpdated(_, let patch, let by, _): say("* \(by ?? "?") updated \(JSONValue.object(patch).jsonString())")
        case .paused: say("* connection lost, reconnecting…")
        case .resumed: say("* reconnected")
        case .kickedOffline(let error): say("* logged out: \(error)")
        default: break
        }
    }

    /// A message as one line: text as `alice: hi`, files as `alice sent photo.png (640×480, 12 KB) <url>`,
    /// locations with their coordinates, other types compactly (`IMMessage.summary`).
    private static func show(_ message: IMMessage, mediaBase: URL?) {
        let time = Date(timeIntervalSince1970: Double(message.timestamp) / 1000).formatted(date: .omitted, time: .standard)
        say("[\(time)] \(message.summary(mediaBase: mediaBase))\(message.isTransient ? " (transient)" : "")")
    }

    private static func standardInputLines() -> AsyncStream<String> {
        AsyncStream { continuation in
            Thread.detachNewThread {
                while let line = readLine() { continuation.yield(line) }
                continuation.finish()
            }
        }
    }
}

/// The progress line of `/upload`: redrawn in place on a terminal when the percentage changes, one line at
/// the end otherwise.
final class UploadMeter: @unchecked Sendable {
    private let name: String
    private let terminal: Bool
    private let lock = NSLock()
    private var shown = -1
    private var last = IMTransferProgress(completedBytes: 0, totalBytes: nil)

    init(name: String, terminal: Bool) {
        self.name = name
        self.terminal = terminal
    }

    func update(_ progress: IMTransferProgress) {
        lock.withLock {
            last = progress
            let percent = Int((progress.fraction ?? 0) * 100)
            guard terminal, percent != shown else { return }
            shown = percent
            say("\r" + line(progress), terminator: "")
        }
    }

    /// Ends a progress line drawn on a terminal, so that the error goes on a line of its own.
    func abandon() {
        lock.withLock { if terminal, shown >= 0 { say("") } }
    }

    func finish() {
        lock.withLock { say((terminal ? "\r" : "") + line(last)) }
    }

    private func line(_ progress: IMTransferProgress) -> String { "* uploading \(name): \(progress)" }
}

/// Writes a line at once, even when standard output is a pipe (where `print` is fully buffered; and
/// `fflush(nil)` would wait for standard input's lock, held by the thread reading lines).
private func say(_ text: String, terminator: String = "\n") {
    FileHandle.standardOutput.write(Data((text + terminator).utf8))
}
