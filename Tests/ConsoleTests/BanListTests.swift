import BotHost
import Foundation
import HookRuntime
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The shipped `plugins/banlist.lua` on real hubs (`hookbot run`: an embedded server with its bot as the
/// interceptor, the console's port serving webhooks): a ban made in one conversation puts the member on the
/// server's block list of every conversation the bot is in, joins of banned ids and patterns are refused with
/// the server's codes, and a second hub subscribed to the first one's published list applies its bans.
final class BanListTests: XCTestCase {
    static let secret = "banlist-secret-0123456789"

    /// The shipped plugin, the mod-log library it requires and its locale files (its words), from the repository.
    static func shippedPlugins() throws -> [String: String] {
        let plugins = ConsoleHarness.repository.appendingPathComponent("plugins")
        var files: [String: String] = [:]
        for file in ["banlist.lua", "lib/modlog.lua", "locales/banlist/en.toml", "locales/banlist/zh-CN.toml"] {
            files[file] = try String(contentsOf: plugins.appendingPathComponent(file), encoding: .utf8)
        }
        return files
    }

    private func client(_ id: String, _ hub: ConsoleHarness) async throws -> (IMClient, EventLog) {
        var options = IMClientOptions(port: hub.port)
        options.requestTimeout = .seconds(10)
        let client = IMClient(clientId: id, options: options)
        let log = EventLog(client)
        try await client.open()
        return (client, log)
    }

    /// Waits until the banlist plugin's state holds `key` with a value `accept` takes.
    private func waitForState(
        _ hub: ConsoleHarness, _ key: String, timeout: Duration = .seconds(10), _ accept: (JSONValue) -> Bool
    ) async throws {
        try await waitUntil("banlist state \(key)", timeout: timeout) {
            try hub.hub.bot.router.plugins.store.get(plugin: "banlist", key: key, now: Date().timeIntervalSince1970).map(accept) ?? false
        }
    }

    private func conversations(_ value: JSONValue) -> Set<String> {
        if case .object(let map) = value { return Set(map.keys) }
        return []
    }

    /// Waits until the server's block list of `cid` (as its member `client` reads it) holds `id`, or no longer does.
    private func waitBlocked(
        _ client: IMClient, _ cid: String, _ id: String, blocked: Bool = true, timeout: Duration = .seconds(10)
    ) async throws {
        try await waitUntil("\(id) \(blocked ? "on" : "off") the block list of \(cid)", timeout: timeout) {
            try await client.conversation(cid).blockedMembers(limit: 100).ids.contains(id) == blocked
        }
    }

    private func joinError(_ client: IMClient, _ cid: String) async -> IMError? {
        do {
            try await client.conversation(cid).join()
            return nil
        } catch {
            return error
        }
    }

    func testABanInOneConversationBlocksTheMemberInEveryOther() async throws {
        let hub = try await ConsoleHarness.start(plugins: Self.shippedPlugins()) {
            $0.plugins.config["banlist"] = ["moderators": ["alice"]]
        }
        addTeardownBlock(releasing: hub) { await $0.stop() }
        let (alice, aliceLog) = try await client("alice", hub)
        let (spammer, spammerLog) = try await client("Spammer", hub)
        let (raider, _) = try await client("raid-7", hub)
        // Spammer is in two of alice's three conversations; the bot in all three.
        let c1 = try await alice.createConversation(members: ["Tom", "Spammer", "modbot"]).id
        let c2 = try await alice.createConversation(members: ["Spammer", "modbot"]).id
        let c3 = try await alice.createConversation(members: ["Tom", "modbot"]).id
        try await waitForState(hub, "convs") { self.conversations($0).isSuperset(of: [c1, c2, c3]) }

        _ = try await alice.conversation(c1).send(.text("!ban @Spammer posting scam links"))
        let answer = try await aliceLog.next("the bot's answer") { event -> String? in
            if case .message(let message) = event, message.from == "modbot", message.conversationId == c1 {
                return message.content.text
            }
            return nil
        }
        // (the bot's lobby may count too)
        XCTAssertTrue(answer.hasPrefix("Spammer is banned in ") && answer.hasSuffix(" conversation(s): posting scam links"), answer)
        // The server removes and blocks Spammer in both of its conversations, and blocks it in the third.
        var blockedIn = Set<String>()
        while !blockedIn.isSuperset(of: [c1, c2]) {
            let cid = try await spammerLog.next("blocked by the bot") { event -> String? in
                if case .blocked(let cid, let by) = event, by == "modbot" { cid } else { nil }
            }
            blockedIn.insert(cid)
        }
        for cid in [c1, c2, c3] { try await waitBlocked(alice, cid, "Spammer") }
        for cid in [c1, c2] {
            do {
                _ = try await spammer.conversation(cid).send(.text("still here?"))
                XCTFail("a banned member sent in \(cid)")
            } catch {
                // Refused as banned by the review (4402, appCode 4330), or as not a member (4401).
                XCTAssertTrue(
                    error.knownCode == .invalidMessagingTarget || (error.knownCode == .messageRejectedByApp && error.appCode == 4330),
                    "\(error)")
            }
        }
        // Joining any of them again is refused by the server's block list: 4315.
        for cid in [c1, c2, c3] {
            let refused = await joinError(spammer, cid)
            XCTAssertEqual(refused?.knownCode, .conversationBlacklisted, "join of \(cid): \(String(describing: refused))")
        }

        // A pattern: the membership review refuses raid-7's join with 4305 and the plugin's appCode.
        _ = try await alice.conversation(c3).send(.text("!ban raid-* raid accounts"))
        _ = try await aliceLog.next("the pattern ban's answer") { event -> Bool? in
            if case .message(let message) = event, message.from == "modbot", message.content.text?.hasPrefix("raid-* is banned") == true {
                return true
            }
            return nil
        }
        let refused = await joinError(raider, c3)
        XCTAssertEqual(refused?.knownCode, .conversationRejectedByApp, "\(String(describing: refused))")
        XCTAssertEqual(refused?.appCode, 4330)
        XCTAssertTrue(refused?.detail?.contains("raid-7 (raid accounts)") == true, "\(String(describing: refused))")
        // ... and puts the id it caught on the block lists, so the server alone refuses it next time.
        for cid in [c1, c2, c3] { try await waitBlocked(alice, cid, "raid-7") }
        let again = await joinError(raider, c1)
        XCTAssertEqual(again?.knownCode, .conversationBlacklisted, "\(String(describing: again))")

        // Unbanned: the blocks the ban made are lifted, and Spammer may join again.
        _ = try await alice.conversation(c1).send(.text("!unban Spammer"))
        for cid in [c1, c2, c3] { try await waitBlocked(alice, cid, "Spammer", blocked: false) }
        let rejoin = await joinError(spammer, c3)
        XCTAssertNil(rejoin, "Spammer could not join after the unban")
        _ = try await spammer.conversation(c3).send(.text("back, and better behaved"))
        for client in [alice, spammer, raider] { await client.close() }
    }

    func testASubscribedHubAppliesTheBansOfAPublishedList() async throws {
        // The publisher: its list at GET /hooks/banlist/list.json, behind the webhook secret.
        let publisher = try await ConsoleHarness.start(plugins: Self.shippedPlugins()) {
            $0.plugins.config["banlist"] = ["moderators": ["alice"]]
            $0.webhooks.secrets = ["banlist": Self.secret]
        }
        addTeardownBlock(releasing: publisher) { await $0.stop() }
        let listURL = "http://127.0.0.1:\(publisher.port)/hooks/banlist/list.json"
        // The subscriber: fetches it every second through its HTTP allow-list.
        let subscriber = try await ConsoleHarness.start(plugins: Self.shippedPlugins()) {
            $0.plugins.config["banlist"] = ["subscribe": [["url": .string(listURL), "token": .string(Self.secret), "every": 1]]]
            $0.httpPolicies["banlist"] = HTTPPolicy(hosts: ["127.0.0.1:\(publisher.port)"])
        }
        addTeardownBlock(releasing: subscriber) { await $0.stop() }

        let (alice, aliceLog) = try await client("alice", publisher)
        let there = try await alice.createConversation(members: ["modbot"]).id
        let (bob, _) = try await client("bob", subscriber)
        let (raider, raiderLog) = try await client("Raider", subscriber)
        let here = try await bob.createConversation(members: ["Raider", "modbot"]).id
        try await waitForState(subscriber, "convs") { self.conversations($0).contains(here) }
        _ = try await raider.conversation(here).send(.text("hello before the ban"))

        _ = try await alice.conversation(there).send(.text("!ban Raider raided three communities"))
        _ = try await aliceLog.next("the ban's answer") { $0.receivedMessage?.from == "modbot" ? true : nil }

        // The published list, as a browser or curl reads it; without the token: 401.
        var request = URLRequest(url: URL(string: listURL)!)
        request.setValue(Self.secret, forHTTPHeaderField: "X-Hookbot-Secret")
        let (data, response) = try await URLSession.shared.data(for: request)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        let list = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let entries = list?["entries"] as? [[String: Any]]
        XCTAssertEqual(entries?.count, 1)
        XCTAssertEqual(entries?.first?["target"] as? String, "Raider")
        XCTAssertEqual(entries?.first?["reason"] as? String, "raided three communities")
        XCTAssertEqual(entries?.first?["by"] as? String, "alice")
        let (_, anonymous) = try await URLSession.shared.data(for: URLRequest(url: URL(string: listURL)!))
        XCTAssertEqual((anonymous as? HTTPURLResponse)?.statusCode, 401)

        // Within a refresh or two the subscriber blocks Raider where it is a member.
        let blocked = try await raiderLog.next("blocked by the subscribed list", timeout: .seconds(10)) { event -> String? in
            if case .blocked(let cid, let by) = event, by == "modbot", cid == here { cid } else { nil }
        }
        XCTAssertEqual(blocked, here)
        let refused = await joinError(raider, here)
        XCTAssertEqual(refused?.knownCode, .conversationBlacklisted, "\(String(describing: refused))")
        try await waitForState(subscriber, "remote:\(listURL)") { value in
            if case .object(let copy) = value, case .array(let entries)? = copy["entries"] { return entries.count == 1 }
            return false
        }
        for client in [alice, bob, raider] { await client.close() }
    }
}
