import ArgumentParser
import Foundation
import IMClient
import IMCore

struct ChatCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chat", abstract: "A terminal chat client for trying bots by hand.",
        discussion: """
            Type a line to send it. Commands: /join <name or id>, /quit, /members, /history [n], \
            /cmd <action> [json object], /typing, /exit.
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
        let printer = Task { for await event in events { Self.show(event, me: clientId) } }
        print("Logged in as \(clientId) in \(current.name ?? current.id). /exit leaves.")
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
                print("! \(error)")
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
            print("* now in \(joined.name ?? joined.id)")
            return joined
        case "/quit":
            try await conversation.quit()
            print("* left \(conversation.name ?? conversation.id)")
        case "/members":
            let fresh = try await conversation.fetch()
            print("* members: \((fresh?.members ?? []).joined(separator: ", "))")
        case "/history":
            let limit = parts.count > 1 ? Int(parts[1]) ?? 20 : 20
            for message in try await conversation.messages(limit: limit) { Self.show(message) }
        case "/cmd" where parts.count > 1:
            var ext: [String: JSONValue] = [:]
            if parts.count > 2 {
                guard let object = JSONValue.parse(parts[2])?.objectValue else {
                    print("! /cmd takes a JSON object, e.g. /cmd poke {\"times\": 2}")
                    return conversation
                }
                ext = object
            }
            _ = try await conversation.sendCmd(action: parts[1], ext: ext)
        case "/typing":
            _ = try await conversation.send(.typed(TypedMessage(type: Self.operationType, text: "typing…")), options: .transient)
        default:
            print("! commands: /join <name or id>, /quit, /members, /history [n], /cmd <action> [json], /typing, /exit")
        }
        return conversation
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

    private static func show(_ event: IMEvent, me: String) {
        switch event {
        case .message(let message) where message.from != me: show(message)
        case .cmd(let cmd): print("* \(cmd.from) /\(cmd.action) \(JSONValue.object(cmd.ext).jsonString())")
        case .membersJoined(_, let members, let by): print("* \(members.joined(separator: ", ")) joined (by \(by ?? "?"))")
        case .membersLeft(_, let members, let by): print("* \(members.joined(separator: ", ")) left (by \(by ?? "?"))")
        case .kicked(_, let by): print("* you were removed by \(by ?? "?")")
        case .recalled(let message): print("* \(message.from) recalled a message")
        case .conversationUpdated(_, let patch, let by, _): print("* \(by ?? "?") updated \(JSONValue.object(patch).jsonString())")
        case .paused: print("* connection lost, reconnecting…")
        case .resumed: print("* reconnected")
        case .kickedOffline(let error): print("* logged out: \(error)")
        default: break
        }
    }

    private static func show(_ message: IMMessage) {
        let time = Date(timeIntervalSince1970: Double(message.timestamp) / 1000).formatted(date: .omitted, time: .standard)
        let body = message.content.text ?? message.content.body
        print("[\(time)] \(message.from)\(message.isTransient ? " (transient)" : ""): \(body)")
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
