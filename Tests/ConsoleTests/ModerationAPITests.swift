import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// `GET /api/moderation/actions` and its undo, against the shipped moderation plugins and the demo's
/// `hookbot.toml` on a real embedded server: Tom's scams get him muted on the server, the console lifts it.
final class ModerationAPITests: XCTestCase {
    /// The demo's configuration, with the console's overrides kept in a temporary file (never the repository's).
    static func demo() async throws -> (ConsoleHarness, URL) {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-mod-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        var configuration = try BotConfiguration.load(path: ConsoleHarness.repository.appendingPathComponent("hookbot.toml").path)
        configuration.overrides = ConfigOverrides(path: scratch.appendingPathComponent("hookbot.overrides.toml").path)
        return (try await ConsoleHarness.start(plugins: [:], base: configuration), scratch)
    }

    /// Tom posts scams until the second strike mutes him on the server; returns his client and lobby.
    static func getMuted(_ harness: ConsoleHarness) async throws -> (IMClient, IMConversation) {
        let (tom, lobby, _) = try await harness.lobbyMember("Tom")
        _ = try await lobby.send(.text("hi all 👋, 我是 Tom"))
        for text in ["cheap watches, total scam lol", "again: what a s c a m"] {
            try await lobby.sendRefused(text)
        }
        try await eventually("Tom muted on the server") {
            do {
                _ = try await lobby.send(.text("can I still talk?"))
                return false
            } catch let error as IMError {
                return error.code == IMErrorCode.memberMuted.rawValue
            }
        }
        return (tom, lobby)
    }

    func actions(_ harness: ConsoleHarness, _ query: String = "") async throws -> [[String: Any]] {
        let answer = try await harness.admin("GET", "/api/moderation/actions" + query)
        XCTAssertEqual(answer.status, 200, answer.text)
        return try answer.object()["actions"] as? [[String: Any]] ?? []
    }

    func testFiltersAndUndoLiftTheServerMute() async throws {
        let (harness, scratch) = try await Self.demo()
        defer { try? FileManager.default.removeItem(at: scratch) }
        do {
            let (tom, lobby) = try await Self.getMuted(harness)
            let cid = harness.hub.lobbyID
            let all = try await actions(harness)
            let mute = try XCTUnwrap(
                all.first { ($0["action"] as? String ?? "").contains("mute") && $0["target"] as? String == "Tom" }, "\(all)")
            XCTAssertEqual(mute["plugin"] as? String, "moderation")
            XCTAssertEqual(mute["cid"] as? String, cid)
            XCTAssertEqual(mute["rule"] as? String, "word")
            XCTAssertEqual(mute["undo"] as? String, "!mod pardon Tom \(cid)")
            XCTAssertEqual(mute["dryRun"] as? Bool, false)
            let id = try XCTUnwrap(mute["id"] as? String)
            XCTAssertTrue(id.hasPrefix("moderation:"), id)

            // Filters, done by the server.
            let forTom = try await actions(harness, "?target=Tom&plugin=moderation&cid=\(cid)&rule=word&dry_run=false")
            XCTAssertEqual(forTom.count, 2, "a warning and a mute: \(forTom)")
            let value1 = try await actions(harness, "?action=mute").map { $0["id"] as? String }
            XCTAssertEqual(value1, [id])
            let value2 = try await actions(harness, "?q=MUTE").map { $0["id"] as? String }.contains(id)
            XCTAssertEqual(value2, true)
            let future = Int(Date().timeIntervalSince1970) + 3600
            for (query, expected) in [
                ("?target=Jerry", 0),
                ("?plugin=gatekeeper&target=Tom", 0),
                ("?dry_run=true&target=Tom", 0),
                ("?since=\(future)", 0),
                ("?until=\(future)&target=Tom", 2),
                ("?limit=1", 1),
            ] {
                let found = try await actions(harness, query).count
                XCTAssertEqual(found, expected, query)
            }
            for bad in ["?limit=0", "?limit=501", "?dry_run=maybe", "?since=yesterday"] {
                let answer = try await harness.admin("GET", "/api/moderation/actions" + bad)
                XCTAssertEqual(answer.status, 400, bad)
                XCTAssertEqual(try answer.object()["code"] as? Int, 400)
            }
            let value9 = try await harness.http("GET", "/api/moderation/actions").status
            XCTAssertEqual(value9, 401)
            let value10 = try await harness.http("POST", "/api/moderation/actions/\(id)/undo").status
            XCTAssertEqual(value10, 401)

            // Undo: the plugin's own command, run as the console; its answer comes back here.
            let undo = try await harness.admin("POST", "/api/moderation/actions/\(id)/undo")
            XCTAssertEqual(undo.status, 200, undo.text)
            let done = try undo.object()
            XCTAssertEqual(done["command"] as? String, "!mod pardon Tom \(cid)")
            let replies = done["replies"] as? [String] ?? []
            XCTAssertTrue(replies.contains { $0.contains("Tom is pardoned") }, "\(replies)")
            // Tom can talk again: the server's mute is lifted.
            try await eventuallySending("谢谢 🙏 sorry about that", in: lobby, accepted: true, "Tom's mute lifted")
            // The entry shows the undo; the plugin logged the pardon, by the console.
            let after = try await actions(harness, "?target=Tom")
            let undone = try XCTUnwrap(after.first { $0["id"] as? String == id }?["undone"] as? [String: Any])
            XCTAssertEqual(undone["by"] as? String, "console")
            let pardon = try XCTUnwrap(after.first { $0["action"] as? String == "pardon" }, "\(after)")
            XCTAssertEqual(pardon["by"] as? String, "console:admin")
            // Twice, an unknown id, an entry without undo: refused with a reason.
            let again = try await harness.admin("POST", "/api/moderation/actions/\(id)/undo")
            XCTAssertEqual(again.status, 409)
            XCTAssertTrue((try again.object()["reason"] as? String ?? "").contains("undone already"), again.text)
            let value11 = try await harness.admin("POST", "/api/moderation/actions/moderation:999999/undo").status
            XCTAssertEqual(value11, 404)
            let pardonID = try XCTUnwrap(pardon["id"] as? String)
            let value12 = try await harness.admin("POST", "/api/moderation/actions/\(pardonID)/undo").status
            XCTAssertEqual(value12, 409)
            await tom.close()
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    /// A moderator's `!ban` (banlist) blocks Jerry on the server; the console's undo (`!unban Jerry`) lets him back in.
    func testUndoOfABanLetsTheMemberBackIn() async throws {
        let (harness, scratch) = try await Self.demo()
        defer { try? FileManager.default.removeItem(at: scratch) }
        do {
            let (alice, aliceLobby, _) = try await harness.lobbyMember("alice")
            let (jerry, jerryLobby, _) = try await harness.lobbyMember("Jerry")
            _ = try await jerryLobby.send(.text("hello 大家好 🧀"))
            _ = try await aliceLobby.send(.text("!ban Jerry posting phishing links"))
            try await eventuallySending("am I still here?", in: jerryLobby, accepted: false, "Jerry blocked from the lobby")
            let bans = try await actions(harness, "?plugin=banlist&action=ban&target=Jerry")
            let ban = try XCTUnwrap(bans.first, "\(bans)")
            XCTAssertEqual(ban["undo"] as? String, "!unban Jerry")
            XCTAssertEqual(ban["by"] as? String, "alice")
            let id = try XCTUnwrap(ban["id"] as? String)
            let undo = try await harness.admin("POST", "/api/moderation/actions/\(id)/undo")
            XCTAssertEqual(undo.status, 200, undo.text)
            try await eventually("Jerry back in the lobby") {
                do {
                    try await jerryLobby.join()
                    _ = try await jerryLobby.send(.text("thanks, I'm back"))
                    return true
                } catch {
                    return false
                }
            }
            let unban = try await actions(harness, "?plugin=banlist&action=unban&target=Jerry")
            XCTAssertEqual(unban.first?["by"] as? String, "console:admin", "\(unban)")
            await alice.close()
            await jerry.close()
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }
}
