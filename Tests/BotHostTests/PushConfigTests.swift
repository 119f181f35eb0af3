import BotHost
import BotHub
import Crypto
import Foundation
import HookbotConfig
import IMServer
import PushProviders
import XCTest
import _CryptoExtras

/// `[push]` and `[push.<provider>]` in hookbot.toml: read, checked with file, line and key, and each provider
/// built from real key files the test makes (a P-256 `.p8`, an RSA service account, a VAPID key).
final class PushConfigTests: XCTestCase {
    private static let rsaKey = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    private var directory: URL!
    private let apnsKey = P256.Signing.PrivateKey()
    private let vapidKey = P256.Signing.PrivateKey()

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("push-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try write("AuthKey_KEY123.p8", apnsKey.pemRepresentation)
        let account: [String: String] = [
            "type": "service_account", "project_id": "hookbot-test", "private_key_id": "kid-1",
            "private_key": Self.rsaKey.pemRepresentation, "client_email": "push@hookbot-test.iam.gserviceaccount.com",
            "token_uri": "https://oauth2.googleapis.com/token",
        ]
        try write("firebase.json", String(decoding: JSONEncoder().encode(account), as: UTF8.self))
        try write("vapid.pem", vapidKey.pemRepresentation)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private func write(_ name: String, _ text: String) throws {
        try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
    }

    private func parse(_ text: String) throws -> BotConfiguration {
        try BotConfiguration.parse(text, relativeTo: directory)
    }

    private static let full = """
        [push]
        workers = 8
        retry_delay = "3s"
        max_retry_delay = "2m"
        max_age = "6h"
        request_timeout = 5
        allowed_hosts = ["push.services.mozilla.com", "fcm.googleapis.com"]

        [push.templates]
        text = "{from} says {text}"
        image = "{from}: 📷"
        7 = "{from} shared a sticker"
        title = ""
        max_body_chars = 120

        [push.apns]
        key_file = "AuthKey_KEY123.p8"
        key_id = "KEY123"
        team_id = "TEAM456"
        topic = "com.example.chat"
        environment = "sandbox"
        concurrency = 20

        [push.fcm]
        service_account = "firebase.json"
        endpoint = "http://127.0.0.1:9/"
        token_uri = "http://127.0.0.1:9/token"

        [push.webpush]
        vapid_key = "vapid.pem"
        subject = "mailto:ops@example.com"
        ttl = 3600

        [push.unifiedpush]
        allow_http = true
        allow_private_addresses = true

        [push.webhook]
        url = "https://gateway.example.net/hookbot"
        secret = "env:HOOKBOT_TEST_PUSH_SECRET"
        """

    func testEveryProviderSectionIsReadAndBuiltFromItsKeyFiles() async throws {
        setenv("HOOKBOT_TEST_PUSH_SECRET", "sixteen-bytes-at-least", 1)
        defer { unsetenv("HOOKBOT_TEST_PUSH_SECRET") }
        let push = try parse(Self.full).push
        XCTAssertTrue(push.isEnabled)
        XCTAssertEqual(push.providers.map(\.name), ["apns", "fcm", "webpush", "unifiedpush", "webhook"])
        XCTAssertEqual(push.workers, 8)
        XCTAssertEqual(push.retryDelay, .seconds(3))
        XCTAssertEqual(push.maxRetryDelay, .seconds(120))
        XCTAssertEqual(push.maxAge, .seconds(6 * 3600))
        XCTAssertEqual(push.http.requestTimeout, .seconds(5))
        XCTAssertEqual(push.templatesByType, [-1: "{from} says {text}", -2: "{from}: 📷", 7: "{from} shared a sticker"])
        XCTAssertEqual(push.titleTemplate, .some(nil)) // "": no title
        XCTAssertNil(push.sound) // unset: the server's
        XCTAssertEqual(push.maxBodyCharacters, 120)

        guard case .apns(let apns) = push.provider("apns") else { return XCTFail("no apns") }
        XCTAssertEqual(apns.teamID, "TEAM456")
        XCTAssertEqual(apns.keyID, "KEY123")
        XCTAssertEqual(apns.topic, "com.example.chat")
        XCTAssertEqual(apns.environment, .sandbox)
        XCTAssertEqual(apns.maxConcurrentRequests, 20)
        XCTAssertEqual(try P256.Signing.PrivateKey(pemRepresentation: apns.privateKeyPEM).rawRepresentation, apnsKey.rawRepresentation)

        guard case .fcm(let fcm) = push.provider("fcm") else { return XCTFail("no fcm") }
        XCTAssertEqual(fcm.serviceAccount.projectID, "hookbot-test")
        XCTAssertEqual(fcm.serviceAccount.tokenURI, "http://127.0.0.1:9/token")
        XCTAssertEqual(fcm.endpoint, "http://127.0.0.1:9/")

        guard case .webPush(let webPush) = push.provider("webpush") else { return XCTFail("no webpush") }
        XCTAssertEqual(webPush.defaultTTL, 3600)
        XCTAssertEqual(webPush.vapid.subject, "mailto:ops@example.com")
        // [push] allowed_hosts is the endpoint allow-list of the sections that post to device URLs.
        XCTAssertEqual(webPush.endpointPolicy.allowedHosts, ["push.services.mozilla.com", "fcm.googleapis.com"])
        XCTAssertFalse(webPush.endpointPolicy.allowHTTP)

        guard case .unifiedPush(let unifiedPush) = push.provider("unifiedpush") else { return XCTFail("no unifiedpush") }
        XCTAssertNil(unifiedPush.vapid)
        XCTAssertTrue(unifiedPush.endpointPolicy.allowHTTP)
        XCTAssertTrue(unifiedPush.endpointPolicy.allowPrivateAddresses)

        guard case .webhook(let webhook) = push.provider("webhook") else { return XCTFail("no webhook") }
        XCTAssertEqual(webhook.secret, "sixteen-bytes-at-least") // from the environment, not the file

        // The providers the server will send with are built from these settings: the Web Push one announces the
        // public half of the VAPID key the file named.
        let http = try PushHTTPClient()
        let provider = try push.provider("webpush")?.makeProvider(http: http) as? WebPushProvider
        XCTAssertEqual(provider?.applicationServerKey, Base64URL.encode(vapidKey.publicKey.x963Representation))
        try await http.shutdown()
    }

    func testKeysMayComeFromTheEnvironmentAndNoSectionMeansNoPush() throws {
        XCTAssertFalse(try parse("[bot]\nclient_id = \"b\"").push.isEnabled)
        setenv("HOOKBOT_TEST_APNS_KEY", apnsKey.pemRepresentation, 1)
        defer { unsetenv("HOOKBOT_TEST_APNS_KEY") }
        let push = try parse("[push.apns]\nkey_file = \"env:HOOKBOT_TEST_APNS_KEY\"\nkey_id = \"K\"\nteam_id = \"T\"\ntopic = \"a.b\"").push
        guard case .apns(let apns) = push.provider("apns") else { return XCTFail("no apns") }
        XCTAssertEqual(apns.environment, .production)
        XCTAssertNil(apns.endpoint)
        XCTAssertEqual(try P256.Signing.PrivateKey(pemRepresentation: apns.privateKeyPEM).rawRepresentation, apnsKey.rawRepresentation)
        // A base64url VAPID key (as web-push generate-vapid-keys prints it) from the environment.
        setenv("HOOKBOT_TEST_VAPID", Base64URL.encode(vapidKey.rawRepresentation), 1)
        defer { unsetenv("HOOKBOT_TEST_VAPID") }
        let web = try parse("[push.webpush]\nvapid_key = \"env:HOOKBOT_TEST_VAPID\"\nsubject = \"https://example.com\"").push
        XCTAssertNotNil(web.provider("webpush"))
    }

    /// Every refusal names the file, the line and the key; an unusable key is found at load, by building the
    /// provider (PushError's code in the message), not at the first push.
    func testBadSettingsAndUnusableKeysAreErrorsAtLoadWithFileLineAndKey() throws {
        try write("bad.p8", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
        try write("rsa-as-p8.p8", Self.rsaKey.pemRepresentation)
        try write("no-key.json", #"{"type": "service_account", "project_id": "p", "client_email": "e@x"}"#)
        try write("short-vapid.txt", "AAAA")
        let apns = "[push.apns]\nkey_id = \"K\"\nteam_id = \"T\"\ntopic = \"a.b\"\n"
        let cases: [(String, String)] = [
            (apns + "key_file = \"bad.p8\"", "hookbot.toml:5: push.apns.key_file: 4704 APNs key K is not a PEM P-256 private key (.p8)"),
            (
                apns + "key_file = \"rsa-as-p8.p8\"",
                "hookbot.toml:5: push.apns.key_file: 4704 APNs key K is not a PEM P-256 private key (.p8)"
            ),
            (apns + "key_file = \"missing.p8\"", "hookbot.toml:5: push.apns.key_file: names a file that cannot be read"),
            (apns, "push.apns.key_file: is required (a file's path, or env:NAME)"),
            (
                apns + "key_file = \"env:HOOKBOT_TEST_UNSET_VARIABLE\"",
                "hookbot.toml:5: push.apns.key_file: environment variable HOOKBOT_TEST_UNSET_VARIABLE is not set"
            ),
            (
                apns + "key_file = \"AuthKey_KEY123.p8\"\nenvironment = \"staging\"",
                "hookbot.toml:6: push.apns.environment: must be \"production\" or \"sandbox\""
            ),
            (
                apns + "key_file = \"AuthKey_KEY123.p8\"\nendpoint = \"ftp://x\"",
                "hookbot.toml:6: push.apns.endpoint: must be an http:// or https:// URL"
            ),
            (apns + "key_file = \"AuthKey_KEY123.p8\"\nkeyid = \"K\"", "hookbot.toml:6: push.apns.keyid: unknown key"),
            ("[push.apns]\nkey_file = \"AuthKey_KEY123.p8\"\nkey_id = \"K\"\ntopic = \"a.b\"", "push.apns.team_id: is required"),
            (
                "[push.fcm]\nservice_account = \"no-key.json\"",
                "hookbot.toml:2: push.fcm.service_account: 4704 the FCM service account file has no 'private_key'"
            ),
            (
                "[push.fcm]\nservice_account = \"vapid.pem\"",
                "hookbot.toml:2: push.fcm.service_account: 4704 the FCM service account file is not a JSON object"
            ),
            (
                "[push.webpush]\nvapid_key = \"short-vapid.txt\"\nsubject = \"mailto:a@b\"",
                "hookbot.toml:2: push.webpush.vapid_key: 4704 the VAPID key is neither PEM nor base64url"
            ),
            (
                "[push.webpush]\nvapid_key = \"vapid.pem\"\nsubject = \"ops@example.com\"",
                "hookbot.toml:3: push.webpush.subject: 4705 the VAPID subject is a mailto: or https: URI"
            ),
            ("[push.webpush]\nvapid_key = \"vapid.pem\"", "push.webpush.subject: is required"),
            ("[push.webpush]\nsubject = \"mailto:a@b\"", "push.webpush.vapid_key: is required"),
            (
                "[push.webhook]\nurl = \"https://gw.example\"\nsecret = \"short\"",
                "hookbot.toml:3: push.webhook.secret: 4705 the webhook secret is at least 16 bytes"
            ),
            ("[push.webhook]\nsecret = \"sixteen-bytes-at-least\"", "push.webhook.url: is required"),
            ("[push.gcm]\nkey = 1", "hookbot.toml:1: push.gcm: unknown key (known: allow_http"),
            ("[push]\nworkers = 0", "hookbot.toml:2: push.workers: must be between 1 and 1024"),
            ("[push]\nretry_delay = \"soon\"", "hookbot.toml:2: push.retry_delay: must be a duration"),
            (
                "[push]\nretry_delay = \"10s\"\nmax_retry_delay = \"5s\"",
                "hookbot.toml:3: push.max_retry_delay: must be at least retry_delay"
            ),
            ("[push]\nallowed_hosts = [\"https://x.example/\"]", "hookbot.toml:2: push.allowed_hosts: must be a list of host names"),
            ("[push]\ntrust_roots = \"none.pem\"", "hookbot.toml:2: push.trust_roots: names a file that cannot be read"),
            ("[push.templates]\nsticker = \"x\"", "hookbot.toml:2: push.templates.sticker: unknown key (known: audio, file, image"),
            ("[push.templates]\ntext = \"\"", "hookbot.toml:2: push.templates.text: must be a template"),
            ("[push.templates]\nmax_body_chars = 0", "hookbot.toml:2: push.templates.max_body_chars: must be between 1 and 4000"),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try parse(text), text) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(text)\n→ \(error)\nexpected: \(expected)")
            }
        }
    }

    /// docs/PUSH.md's "Settings" example, as written, with the key files it names.
    func testTheDocumentedExampleLoads() throws {
        let root = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let markdown = try String(contentsOf: root.appendingPathComponent("docs/PUSH.md"), encoding: .utf8)
        let section = try XCTUnwrap(markdown.components(separatedBy: "## Settings\n").dropFirst().first)
        let block = try XCTUnwrap(section.components(separatedBy: "```toml\n").dropFirst().first?.components(separatedBy: "```").first)
        try FileManager.default.copyItem(
            at: directory.appendingPathComponent("firebase.json"), to: directory.appendingPathComponent("firebase-service-account.json"))
        setenv("HOOKBOT_PUSH_SECRET", "sixteen-bytes-at-least", 1)
        defer { unsetenv("HOOKBOT_PUSH_SECRET") }
        let push = try parse(block).push
        XCTAssertEqual(push.providers.map(\.name), ["apns", "fcm", "webpush", "unifiedpush", "webhook"])
        XCTAssertEqual(push.templatesByType[-2], "{from} sent a photo")
        guard case .unifiedPush(let unifiedPush) = push.provider("unifiedpush") else { return XCTFail("no unifiedpush") }
        XCTAssertEqual(unifiedPush.endpointPolicy.allowedHosts, ["ntfy.example.net"])
    }

    /// What the file set reaches the server's `PushConfiguration`; what it left unset keeps the server's default.
    func testTheServerConfigurationGetsThem() throws {
        setenv("HOOKBOT_TEST_PUSH_SECRET", "sixteen-bytes-at-least", 1)
        defer { unsetenv("HOOKBOT_TEST_PUSH_SECRET") }
        let bot = try parse(Self.full)
        var server = PushConfiguration()
        let defaults = PushConfiguration()
        XCTAssertFalse(server.isEnabled)
        server.apply(bot.push)
        XCTAssertTrue(server.isEnabled)
        XCTAssertEqual(server.providers.map(\.name), ["apns", "fcm", "webpush", "unifiedpush", "webhook"])
        guard case .apns(let apns) = server.providers.first?.kind else { return XCTFail("apns first") }
        XCTAssertEqual(apns.topic, "com.example.chat")
        XCTAssertEqual(server.http.requestTimeout, .seconds(5))
        XCTAssertEqual(server.templates.byType[-1], "{from} says {text}")
        XCTAssertEqual(server.templates.byType[7], "{from} shared a sticker")
        XCTAssertEqual(server.templates.byType[-3], defaults.templates.byType[-3]) // unset: the server's
        XCTAssertNil(server.templates.title)
        XCTAssertEqual(server.templates.sound, defaults.templates.sound)
        XCTAssertEqual(server.templates.maxBodyCharacters, 120)
        XCTAssertEqual(server.queue.workers, 8)
        XCTAssertEqual(server.queue.retryDelay, .seconds(3))
        XCTAssertEqual(server.queue.maxRetryDelay, .seconds(120))
        XCTAssertEqual(server.queue.maxAge, .seconds(6 * 3600))
        XCTAssertEqual(server.queue.pollInterval, defaults.queue.pollInterval)
    }

    /// `hookbot server --push-config FILE` reads the `[push]` sections of any TOML file (the bot's hookbot.toml
    /// included: its other sections are not the server's business), with the same checks.
    func testAPushConfigFileIsReadOnItsOwn() throws {
        setenv("HOOKBOT_TEST_PUSH_SECRET", "sixteen-bytes-at-least", 1)
        defer { unsetenv("HOOKBOT_TEST_PUSH_SECRET") }
        try write("push.toml", "[bot]\nclient_id = \"x\"\n\n" + Self.full)
        let path = directory.appendingPathComponent("push.toml").path
        XCTAssertEqual(try PushSettings.load(path: path).providers.count, 5)
        try write("broken.toml", "[push.webhook]\nurl = \"https://gw.example\"\nsecret = \"short\"")
        let broken = directory.appendingPathComponent("broken.toml").path
        XCTAssertThrowsError(try PushSettings.load(path: broken)) { error in
            XCTAssertEqual("\(error)", "\(broken):3: push.webhook.secret: 4705 the webhook secret is at least 16 bytes")
        }
        try write("none.toml", "[server]\nport = 1")
        XCTAssertFalse(try PushSettings.load(path: directory.appendingPathComponent("none.toml").path).isEnabled)
    }
}
