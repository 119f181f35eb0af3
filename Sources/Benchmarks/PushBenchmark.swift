import Crypto
import Foundation
import IMClient
import IMCore
import IMServer
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PushProviders
import Synchronization

/// The `push` workload of `hookbot bench` (docs/PERFORMANCE.md, "Offline push"): a group of `members` in which
/// `offline` members are not connected and each has a Web Push subscription (a real RFC 8291 key pair, made for
/// this run) whose endpoint is a push service the benchmark runs on loopback (HTTP/1.1; it answers 201 and
/// counts, and decrypts a sample with the subscription's private key to prove the payload is the real one);
/// the other members are online and measure the message round trip. The same run without devices (the same
/// group, nobody has a subscription) is the baseline the round trip is compared with.
struct PushBenchmark {
    let root: URL
    let logger: Logger
    let relaxedSync: Bool
    let messages: Int
    let members: Int
    let offline: Int
    /// Every `sampleEvery`-th notification the endpoint receives is decrypted and checked.
    let sampleEvery = 97

    init(root: URL, logger: Logger, relaxedSync: Bool, scale: Double) {
        self.root = root
        self.logger = logger
        self.relaxedSync = relaxedSync
        messages = max(10, Int(1000 * scale))
        members = 2000
        offline = 1900
    }

    func run() async throws -> PushBenchResult {
        let baseline = try await phase("push-baseline", devices: false)
        let loaded = try await phase("push-devices", devices: true)
        func change(_ with: Double, _ without: Double) -> Double {
            without > 0 ? ((with - without) / without * 1000).rounded() / 10 : 0
        }
        return PushBenchResult(
            messages: messages, members: members, offlineWithDevices: offline, online: members - offline,
            notifications: loaded.notifications, duplicates: loaded.duplicates, missing: loaded.missing,
            notificationsPerSecond: loaded.notificationsPerSecond, drainSeconds: loaded.drainSeconds,
            sendSeconds: loaded.sendSeconds, decryptedSamples: loaded.decrypted, badSamples: loaded.badSamples,
            roundTripWithDevicesMs: loaded.latency, roundTripWithoutDevicesMs: baseline.latency,
            p50ChangePercent: change(loaded.latency.p50, baseline.latency.p50),
            p99ChangePercent: change(loaded.latency.p99, baseline.latency.p99))
    }

    struct Phase {
        var latency: LatencyStats
        var notifications = 0
        var duplicates = 0
        var missing = 0
        var notificationsPerSecond = 0.0
        var drainSeconds = 0.0
        var sendSeconds = 0.0
        var decrypted = 0
        var badSamples = 0
    }

    private func phase(_ name: String, devices: Bool) async throws -> Phase {
        let directory = root.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let endpoint = try await PushEndpoint.start(devices: devices ? offline : 0, sampleEvery: sampleEvery)
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.databasePath = directory.appendingPathComponent("server.sqlite").path
        configuration.synchronousFull = !relaxedSync
        configuration.maxConnectionsPerAddress = members + 64
        var webPush = WebPushSettings(
            vapid: VAPIDSettings(
                subject: "mailto:bench@example.com", privateKey: Base64URL.encode(P256.Signing.PrivateKey().rawRepresentation)))
        // The push service is on loopback over http: what the endpoint policy allows for tests.
        webPush.endpointPolicy = .any
        configuration.push.providers = [PushProviderConfiguration(.webPush(webPush))]
        let server = try IMServer(configuration: configuration, logger: logger)
        let port = try await server.start()
        let clients = Locked<[IMClient]>([])
        let listeners = Locked<[Task<Void, Never>]>([])
        defer {
            for listener in listeners.withLock({ $0 }) { listener.cancel() }
            let open = clients.withLock { $0 }
            Task {
                for client in open { await client.close() }
                await server.stop()
                await endpoint.shutdown()
            }
        }
        func client(_ id: String) -> IMClient {
            var options = IMClientOptions(port: port)
            options.requestTimeout = .seconds(120)
            options.sendTimeout = .seconds(120)
            return IMClient(clientId: id, options: options, logger: logger)
        }
        // The offline members: each logs in, registers its subscription, and goes (a logout that keeps the
        // device: it was registered without this login's deviceId).
        let offlineIDs = (0..<offline).map { "pb-off-\($0)" }
        if devices {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<8 {
                    group.addTask {
                        for index in stride(from: lane, to: offlineIDs.count, by: 8) {
                            let member = client(offlineIDs[index])
                            try await member.open()
                            _ = try await member.registerDevice(endpoint.device(index, url: "http://127.0.0.1:\(endpoint.port)"))
                            await member.close()
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        // The online members (the first one sends) measure the round trip of each delivery.
        let clock = ContinuousClock()
        let sentAt = Locked([Int: ContinuousClock.Instant]())
        let latencies = Locked([Double]())
        let online = members - offline
        let remaining = Locked(messages * (online - 1))
        let (done, finished) = AsyncStream<Void>.makeStream()
        for index in 0..<online {
            let member = client("pb-on-\(index)")
            if index > 0 {
                let listener = Bench.latencyListener(
                    member.events(), clock: clock, sentAt: sentAt, latencies: latencies, remaining: remaining, finished: finished)
                listeners.withLock { $0.append(listener) }
            }
            try await member.open()
            clients.withLock { $0.append(member) }
        }
        let onlineIDs = clients.withLock { $0.map(\.clientId) }
        let sender = clients.withLock { $0[0] }
        // At most 1,000 members at creation: the rest are added 500 at a time.
        let everyone = Array(onlineIDs.dropFirst()) + offlineIDs
        let conversation = try await sender.createConversation(name: "push bench", members: Array(everyone.prefix(500)))
        for start in stride(from: 500, to: everyone.count, by: 500) {
            _ = try await conversation.add(members: Array(everyone[start..<min(everyone.count, start + 500)]))
        }
        endpoint.reset()
        let started = clock.now
        try await Bench.send(messages, to: conversation, clock: clock, sentAt: sentAt)
        let sent = clock.now
        for await _ in done { break }
        var result = Phase(latency: LatencyStats(latencies.withLock { $0 }))
        result.sendSeconds = ((sent - started).milliseconds / 10).rounded() / 100
        guard devices else { return result }
        // Every subscription gets one notification per message; wait until they are all there (or nothing has
        // arrived for 30 s).
        let expected = messages * offline
        var lastCount = -1
        var lastProgress = clock.now
        while endpoint.count < expected, clock.now - lastProgress < .seconds(30) {
            try await Task.sleep(for: .milliseconds(50))
            let count = endpoint.count
            if count != lastCount {
                lastCount = count
                lastProgress = clock.now
            }
        }
        let stats = endpoint.stats(expectedPerDevice: messages)
        let drain = ((stats.last ?? clock.now) - started).milliseconds / 1000
        result.notifications = stats.count
        result.duplicates = stats.duplicates
        result.missing = stats.missing
        result.drainSeconds = (drain * 100).rounded() / 100
        result.notificationsPerSecond = drain > 0 ? (Double(stats.count) / drain).rounded() : 0
        result.decrypted = stats.decrypted
        result.badSamples = stats.bad
        return result
    }
}

struct PushBenchResult: Encodable {
    var messages: Int
    var members: Int
    var offlineWithDevices: Int
    var online: Int
    /// Notifications the endpoint received; each subscription should get exactly one per message.
    var notifications: Int
    var duplicates: Int
    var missing: Int
    /// Notifications received per second, from the first message sent to the last notification received.
    var notificationsPerSecond: Double
    /// From the first message sent until the last notification was received (the queue drained).
    var drainSeconds: Double
    /// How long sending the messages took (acks included).
    var sendSeconds: Double
    /// Notifications the endpoint decrypted with the subscription's private key and found right.
    var decryptedSamples: Int
    var badSamples: Int
    /// Send → delivery to each online member, with the offline members' devices, and without any.
    var roundTripWithDevicesMs: LatencyStats
    var roundTripWithoutDevicesMs: LatencyStats
    var p50ChangePercent: Double
    var p99ChangePercent: Double

    var summaryLines: [String] {
        func number(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }
        return [
            "push: \(messages) messages to \(members) members (\(offlineWithDevices) offline with Web Push, \(online) online): "
                + "\(notifications) notifications (missing \(missing), duplicates \(duplicates)), \(number(notificationsPerSecond))/s, "
                + "drained in \(number(drainSeconds, 2)) s (sent in \(number(sendSeconds, 2)) s); samples decrypted \(decryptedSamples), bad \(badSamples)",
            "push: online round trip p50/p99 \(number(roundTripWithDevicesMs.p50, 3))/\(number(roundTripWithDevicesMs.p99, 3)) ms "
                + "vs \(number(roundTripWithoutDevicesMs.p50, 3))/\(number(roundTripWithoutDevicesMs.p99, 3)) ms without devices "
                + "(\(number(p50ChangePercent, 1)) % / \(number(p99ChangePercent, 1)) %)",
        ]
    }
}

/// A Web Push service on loopback (SwiftNIO HTTP/1.1): `POST /push/<n>` for subscription `n` answers 201 with a
/// `Location`, counts per subscription, and decrypts every `sampleEvery`-th body with the subscription's
/// private key (RFC 8291), checking it is the notification's JSON with a VAPID authorization beside it.
final class PushEndpoint: Sendable {
    struct State {
        var count = 0
        var perDevice: [Int]
        var first: ContinuousClock.Instant?
        var last: ContinuousClock.Instant?
        var decrypted = 0
        var bad = 0
    }

    let port: Int
    /// Each subscription's private key (raw P-256 scalar) and auth secret.
    let keys: [(key: [UInt8], auth: [UInt8])]
    let sampleEvery: Int
    let state: Mutex<State>
    private let channel: any Channel

    private init(channel: any Channel, keys: [(key: [UInt8], auth: [UInt8])], sampleEvery: Int) {
        self.channel = channel
        self.keys = keys
        self.sampleEvery = sampleEvery
        state = Mutex(State(perDevice: Array(repeating: 0, count: keys.count)))
        port = channel.localAddress?.port ?? 0
    }

    static func start(devices: Int, sampleEvery: Int) async throws -> PushEndpoint {
        let keys = (0..<devices).map { _ in
            (key: Array(P256.KeyAgreement.PrivateKey().rawRepresentation), auth: (0..<16).map { _ in UInt8.random(in: 0...255) })
        }
        let box = Locked<PushEndpoint?>(nil)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(PushEndpointHandler(endpoint: { box.withLock { $0 } }))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let endpoint = PushEndpoint(channel: channel, keys: keys, sampleEvery: sampleEvery)
        box.withLock { $0 = endpoint }
        return endpoint
    }

    /// Subscription `index` as a browser would register it.
    func device(_ index: Int, url: String) -> IMPushDevice {
        let entry = keys[index]
        let publicKey = (try? P256.KeyAgreement.PrivateKey(rawRepresentation: entry.key))?.publicKey.x963Representation ?? Data()
        return IMPushDevice(
            provider: .webPush, token: "\(url)/push/\(index)",
            keys: IMPushSubscriptionKeys(p256dh: Base64URL.encode(Array(publicKey)), auth: Base64URL.encode(entry.auth)))
    }

    var count: Int { state.withLock { $0.count } }

    func reset() {
        state.withLock { $0 = State(perDevice: Array(repeating: 0, count: keys.count)) }
    }

    /// What arrived: the count, subscriptions that got more or fewer than `expectedPerDevice`, the last arrival.
    func stats(expectedPerDevice: Int) -> (
        count: Int, duplicates: Int, missing: Int, last: ContinuousClock.Instant?, decrypted: Int, bad: Int
    ) {
        state.withLock { state in
            let duplicates = state.perDevice.reduce(0) { $0 + max(0, $1 - expectedPerDevice) }
            let missing = state.perDevice.reduce(0) { $0 + max(0, expectedPerDevice - $1) }
            return (state.count, duplicates, missing, state.last, state.decrypted, state.bad)
        }
    }

    /// One request: answers the status to send.
    func received(path: Substring, body: [UInt8], headers: HTTPHeaders) -> Int {
        guard let index = Int(path.split(separator: "/").last ?? ""), keys.indices.contains(index) else { return 404 }
        let now = ContinuousClock.now
        let number = state.withLock { state in
            state.count += 1
            state.perDevice[index] += 1
            if state.first == nil { state.first = now }
            state.last = now
            return state.count
        }
        if number % sampleEvery == 1 {
            var good = false
            if headers.first(name: "content-encoding") == "aes128gcm", headers.first(name: "authorization")?.hasPrefix("vapid t=") == true,
                let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: keys[index].key),
                let plain = try? WebPushEncryption.decrypt(body, userAgentKey: key, authSecret: keys[index].auth),
                let json = JSONValue.parse(String(decoding: plain, as: UTF8.self)),
                json["body"]?.stringValue?.hasPrefix("pb-on-0: ") == true
            {
                good = true
            }
            state.withLock { state in
                if good { state.decrypted += 1 } else { state.bad += 1 }
            }
        }
        return 201
    }

    func shutdown() async { try? await channel.close() }
}

private final class PushEndpointHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let endpoint: @Sendable () -> PushEndpoint?
    var path: Substring = ""
    var headers = HTTPHeaders()
    var body: [UInt8] = []
    var keepAlive = true

    init(endpoint: @escaping @Sendable () -> PushEndpoint?) { self.endpoint = endpoint }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            path = Substring(head.uri)
            headers = head.headers
            keepAlive = head.isKeepAlive
            body = []
        case .body(var buffer):
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            let status = endpoint()?.received(path: path, body: body, headers: headers) ?? 503
            let responseHeaders = HTTPHeaders([("content-length", "0"), ("location", "/message/\(UUID().uuidString)")])
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: responseHeaders))),
                promise: nil)
            let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                let channel = context.channel
                written.whenComplete { _ in channel.close(promise: nil) }
            }
        }
    }
}
