// Tom and Jerry: an embedded Hookbot server and two SDK clients exchanging messages.
import Foundation
import IMClient
import IMCore
import IMServer
import Logging

/// An application-defined message type (`_lctype` 1).
struct Poke: IMCustomMessage, Codable {
    static let messageType = 1
    var strength: Int
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tom-and-jerry-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

var configuration = ServerConfiguration()
configuration.port = 0
configuration.databasePath = directory.appendingPathComponent("hookbot.sqlite").path
var serverLogger = Logger(label: "server")
serverLogger.logLevel = .critical
let server = try IMServer(configuration: configuration, logger: serverLogger)
let port = try await server.start()
print("server listening on ws://127.0.0.1:\(port)/ws")

let registry = IMMessageRegistry()
try registry.register(Poke.self)
let options = IMClientOptions(port: port)
let tom = IMClient(clientId: "Tom", options: options, registry: registry)
let jerry = IMClient(clientId: "Jerry", options: options, registry: registry)

// Subscribe before opening: Jerry answers every text and reports pokes.
let jerryEvents = jerry.events()
let jerryListener = Task {
    var seen = 0
    for await event in jerryEvents {
        guard case .message(let message) = event else { continue }
        seen += 1
        if let poke = message.content.as(Poke.self) {
            print("Jerry got a poke of strength \(poke.strength)")
        } else if let text = message.content.text {
            print("Jerry got: \(text)")
            try await jerry.conversation(message.conversationId).send(.text("Five more minutes…"))
        }
        if seen == 2 { return }
    }
}
let tomEvents = tom.events()

try await tom.open()
try await jerry.open()

let conversation = try await tom.createConversation(name: "Tom & Jerry", members: ["Jerry"])
try await conversation.send(.text("Jerry, wake up!"), options: .receipt)
for await event in tomEvents {
    if case .delivered(let receipt) = event { print("Tom: delivered to \(receipt.by)") }
    if case .message(let message) = event {
        print("Tom got: \(message.content.text ?? "")")
        break
    }
}
try await conversation.send(Poke(strength: 3))
try await jerryListener.value

let history = try await conversation.messages(limit: 10)
print("history: \(history.map { "\($0.from): \($0.content.as(Poke.self).map { "poke \($0.strength)" } ?? $0.content.text ?? "")" })")

await tom.close()
await jerry.close()
await server.stop()
print("done")
