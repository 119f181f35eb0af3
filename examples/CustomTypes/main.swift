// Custom message types end to end: an embedded server with the bot as its interceptor, plugins from
// examples/CustomTypes/plugins (poll, link cards) and plugins/typing.lua, and two SDK clients.
import BotHost
import BotHub
import Foundation
import HookRuntime
import IMClient
import IMCore
import Logging

let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
let repository = example.deletingLastPathComponent().deletingLastPathComponent()
let work = FileManager.default.temporaryDirectory.appendingPathComponent("custom-types-\(UUID().uuidString)")
let plugins = work.appendingPathComponent("plugins")
try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: work) }
for (source, name) in [
    (example.appendingPathComponent("plugins/poll.lua"), "poll.lua"),
    (example.appendingPathComponent("plugins/linkcard.lua"), "linkcard.lua"),
    (repository.appendingPathComponent("plugins/typing.lua"), "typing.lua"),
] {
    try FileManager.default.copyItem(at: source, to: plugins.appendingPathComponent(name))
}
// typing.lua's words (ctx.t) come from its locale files.
try FileManager.default.createDirectory(at: plugins.appendingPathComponent("locales"), withIntermediateDirectories: true)
try FileManager.default.copyItem(
    at: repository.appendingPathComponent("plugins/locales/typing"), to: plugins.appendingPathComponent("locales/typing"))

var configuration = BotConfiguration()
configuration.plugins.directory = plugins
configuration.statePath = work.appendingPathComponent("state.sqlite").path
configuration.server.database = work.appendingPathComponent("hub.sqlite").path
configuration.server.port = 0
configuration.plugins.watchInterval = 0
configuration.adminSocketPath = nil
configuration.plugins.config["typing"] = ["announce": true]
var logger = Logger(label: "custom-types")
logger.logLevel = .critical
let hub = try await EmbeddedHub.start(configuration: configuration, logger: logger)

/// Collects a client's messages so the example can wait for a particular one.
actor Inbox {
    private var messages: [IMMessage] = []
    func add(_ m: IMMessage) { messages.append(m) }
    func first(_ predicate: @Sendable (IMMessage) -> Bool) -> IMMessage? { messages.first(where: predicate) }
}

func waitFor(_ inbox: Inbox, _ what: String, _ predicate: @escaping @Sendable (IMMessage) -> Bool) async throws -> IMMessage {
    for _ in 0..<500 {
        if let m = await inbox.first(predicate) { return m }
        try await Task.sleep(nanoseconds: 20_000_000)
    }
    print("timed out waiting for \(what)")
    exit(1)
}

let registry = IMMessageRegistry()
try registry.register(Poll.self)
try registry.register(LinkCard.self)
try registry.register(Operation.self)
let options = IMClientOptions(port: hub.port)
var inboxes: [Inbox] = []
var clients: [IMClient] = []
for name in ["Tom", "Jerry"] {
    let client = IMClient(clientId: name, options: options, registry: registry)
    let inbox = Inbox()
    let events = client.events()
    Task {
        for await event in events {
            // Messages, and new versions of edited ones (the poll's card as its counts change).
            if case .message(let m) = event { await inbox.add(m) }
            if case .edited(let m) = event { await inbox.add(m) }
        }
    }
    try await client.open()
    try await client.conversation(hub.lobbyID).join()
    clients.append(client)
    inboxes.append(inbox)
}
let (tom, jerry) = (clients[0].conversation(hub.lobbyID), clients[1].conversation(hub.lobbyID))
let tomInbox = inboxes[0]
let jerryInbox = inboxes[1]
let bot = configuration.clientID

// 1. A poll: Tom posts it, the bot answers with a card whose buttons are the options; both click Pizza
// (a signed cmd message each), and the bot updates the card's counts in place (an edit of its message).
_ = try await tom.send(Poll(question: "Lunch?", options: ["Pizza", "Sushi"]))
let announced = try await waitFor(tomInbox, "the poll's card") { $0.from == bot && Card(message: $0) != nil }
let pollCard = Card(message: announced)!
print("bot: a card \"\(pollCard.title ?? "")\" with \((pollCard.buttons ?? []).map(\.label))")
let pollSeen = try await waitFor(jerryInbox, "the poll") { $0.content.as(Poll.self) != nil }
print("Jerry sees a poll: \(pollSeen.content.as(Poll.self)!.question) \(pollSeen.content.as(Poll.self)!.options)")
_ = try await tom.click(pollCard, button: pollCard.buttons![0])
_ = try await waitFor(tomInbox, "Tom's vote") { $0.id == announced.id && (Card(message: $0)?.text ?? "") == "1 vote" }
_ = try await jerry.click(pollCard, button: pollCard.buttons![0])
let tally = try await waitFor(tomInbox, "the tally") { $0.id == announced.id && (Card(message: $0)?.text ?? "") == "2 votes" }
let counted = Card(message: tally)!
print("bot: \(counted.title ?? "") \((counted.buttons ?? []).map(\.label).joined(separator: ", ")) (\(counted.text ?? ""))")
guard counted.buttons?.map(\.label) == ["Pizza · 2", "Sushi · 0"] else {
    print("unexpected tally")
    exit(1)
}

// 2. Link cards: Jerry shares one; Tom mentions a link the bot knows and the bot posts its card.
_ = try await jerry.send(
    LinkCard(
        url: "https://example.org/cats", title: "Cats rule", summary: "A study.",
        image: "https://example.org/cat.png"))
let shared = try await waitFor(jerryInbox, "the share count") { $0.from == bot && ($0.content.text ?? "").contains("shared") }
print("bot: \(shared.content.text ?? "")")
_ = try await tom.send(.text("news: https://news.example/hookbot-1-0"))
let card = try await waitFor(tomInbox, "the bot's card") { $0.from == bot && $0.content.as(LinkCard.self) != nil }
let decoded = card.content.as(LinkCard.self)!
print("bot posted a link card: \(decoded.title) — \(decoded.summary ?? "") [\(decoded.image ?? "")]")

// 3. An operation message sent transiently: Jerry sees Tom typing, and the bot relays its own indicator.
_ = try await tom.send(Operation(), options: .transient)
let typing = try await waitFor(jerryInbox, "the typing indicator") { $0.from == "Tom" && $0.content.as(Operation.self) != nil }
print("Jerry sees: Tom \(typing.content.as(Operation.self)!.text) (transient: \(typing.isTransient))")
let relayed = try await waitFor(jerryInbox, "the bot's relay") { $0.from == bot && $0.content.as(Operation.self) != nil }
print("bot relayed: \(relayed.content.as(Operation.self)!.text)")

for client in clients { await client.close() }
await hub.stop()
print("done")
