import AsyncHTTPClient
import CVips
import ChildProcesses
import Foundation
import HummingbirdWSClient
import Logging
import MediaImaging
import NIOCore
import NIOHTTP1

/// The `media` workload of `hookbot bench`: a `hookbot server` child process (SQLite and its media directory in
/// a temporary directory) and an HTTP client (async-http-client) in the benchmark's process, on loopback.
///
/// The server runs as a **separate process** so that its resident size is its own: in one process the client's
/// buffers, the benchmark's 100 MB source and libvips' fixture work would count as the server's. Its peak is the
/// kernel's `VmHWM`, reset before each phase (`/proc/<pid>/clear_refs`, value 5), with a 5 ms sampler of `VmRSS` as
/// the fallback where the reset is refused.
struct MediaBenchmark {
    let root: URL
    let logger: Logger
    /// Bytes of the large file (100 MB; a tenth with `--quick`).
    let largeBytes: Int
    /// Rounds of the large upload and download (each a different content).
    let rounds: Int
    /// Small-image uploads sent at once.
    let concurrentUploads: Int
    /// Cold thumbnails made (each a size not asked for before, so no cache can answer it).
    let thumbnails: Int

    init(root: URL, logger: Logger, scale: Double) {
        self.root = root
        self.logger = logger
        largeBytes = Int(100_000_000 * scale)
        rounds = 3
        concurrentUploads = scale < 1 ? 50 : 200
        thumbnails = scale < 1 ? 3 : 10
    }

    func run() async throws -> MediaBenchResult {
        let directory = root.appendingPathComponent("media")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Its 300 MB of uploads are not left behind in the temporary directory.
        defer { try? FileManager.default.removeItem(at: directory) }
        // The fixtures first, before the server is measured: a 12-megapixel JPEG and a small one (libvips).
        let photo = try Self.noiseImage(directory.appendingPathComponent("photo-12mp.jpg"), width: 4000, height: 3000)
        let small = try Self.noiseImage(directory.appendingPathComponent("small.jpg"), width: 320, height: 240)

        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = concurrentUploads + 8
        configuration.timeout.read = .seconds(120)
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let server = try await ServerProcess.start(directory: directory, maxUploadBytes: Int64(largeBytes) + (1 << 20), http: http)
        var sessions: [Session] = []
        do {
            let result = try await measure(server: server, http: http, photo: photo, small: small, sessions: &sessions)
            for session in sessions { await session.close() }
            server.stop()
            try await http.shutdown()
            return result
        } catch {
            for session in sessions { await session.close() }
            server.stop()
            try? await http.shutdown()
            throw error
        }
    }

    private func measure(server: ServerProcess, http: HTTPClient, photo: Data, small: Data, sessions: inout [Session]) async throws
        -> MediaBenchResult
    {
        let base = "http://127.0.0.1:\(server.port)"
        // Uploaders are logged-in clients (their session tokens): the path every SDK takes, quota check included.
        let uploader = try await Session.open(port: server.port, clientID: "media-bench-large", logger: logger)
        sessions.append(uploader)

        // Large file: upload, then download, `rounds` times, each round a new content (no de-duplication).
        var uploads: [Double] = []
        var downloads: [Double] = []
        var uploadCost = PhaseCost()
        var downloadCost = PhaseCost()
        let chunk = Self.randomBuffer(1 << 20)
        for round in 0..<rounds {
            let watch = server.watchMemory()
            let started = ContinuousClock.now
            let record = try await upload(
                http, base + "/media?name=large-\(round).bin", token: uploader.token,
                body: Self.largeBody(chunk, bytes: largeBytes, round: round), length: largeBytes)
            uploads.append(Self.megabytesPerSecond(largeBytes, since: started))
            uploadCost.add(watch.finish())
            guard let url = record["url"] as? String else { throw BenchError(message: "the upload answered no url: \(record)") }

            let readWatch = server.watchMemory()
            let readStarted = ContinuousClock.now
            let received = try await download(http, base + url)
            downloads.append(Self.megabytesPerSecond(largeBytes, since: readStarted))
            downloadCost.add(readWatch.finish())
            guard received == largeBytes else { throw BenchError(message: "downloaded \(received) of \(largeBytes) bytes") }
        }

        // Thumbnails of a 12-megapixel JPEG: each request a size not asked for before (cold: decoded from the
        // stored file), then one size again and again (what a thumbnail cache may answer).
        let photoRecord = try await upload(
            http, base + "/media?name=photo.jpg", token: uploader.token, body: Self.oneShot(photo), length: photo.count)
        guard let photoURL = photoRecord["url"] as? String else { throw BenchError(message: "no url for the photo") }
        var cold: [Double] = []
        for k in 0..<thumbnails {
            let started = ContinuousClock.now
            let bytes = try await download(http, base + photoURL + "?imageView/2/w/\(200 + k)/h/\(150 + k)")
            cold.append((ContinuousClock.now - started).milliseconds)
            guard bytes > 0 else { throw BenchError(message: "an empty thumbnail") }
        }
        var warm: [Double] = []
        for _ in 0..<thumbnails {
            let started = ContinuousClock.now
            _ = try await download(http, base + photoURL + "?imageView/2/w/200/h/150")
            warm.append((ContinuousClock.now - started).milliseconds)
        }

        // Small images, all at once: 20 clients, each with a share of the uploads. A first burst, not measured,
        // opens the connections (as an app's HTTP client keeps them) and the store's objects/ab/ directories
        // (a server that has run a while has all 256 of them); then the measured burst.
        let clients = 20
        for k in 0..<clients { sessions.append(try await Session.open(port: server.port, clientID: "media-bench-\(k)", logger: logger)) }
        let tokens = sessions.suffix(clients).map(\.token)
        @Sendable func burst(_ round: Int) async throws -> [Double] {
            try await withThrowingTaskGroup(of: Double.self) { group in
                for k in 0..<concurrentUploads {
                    let token = tokens[k % clients]
                    group.addTask {
                        let started = ContinuousClock.now
                        // A few bytes differ per upload, so each is a content of its own (de-duplication would
                        // skip the rename).
                        var bytes = small
                        bytes.append(contentsOf: Array("\(round)-\(k)".utf8))
                        _ = try await upload(
                            http, base + "/media?name=small-\(k).jpg", token: token, body: Self.oneShot(bytes), length: bytes.count)
                        return (ContinuousClock.now - started).milliseconds
                    }
                }
                return try await group.reduce(into: [Double]()) { $0.append($1) }
            }
        }
        _ = try await burst(0)
        let smallWatch = server.watchMemory()
        let burstStarted = ContinuousClock.now
        let latencies = try await burst(1)
        let burstSeconds = (ContinuousClock.now - burstStarted).milliseconds / 1000
        let smallCost = smallWatch.finish()

        return MediaBenchResult(
            server: "hookbot server child process (SQLite, media directory in a temporary directory), loopback HTTP/1.1",
            large: LargeFileResult(
                bytes: largeBytes, rounds: rounds,
                uploadMBPerSecond: Self.median(uploads), downloadMBPerSecond: Self.median(downloads),
                uploadRoundsMBPerSecond: uploads, downloadRoundsMBPerSecond: downloads,
                uploadCost: uploadCost, downloadCost: downloadCost),
            thumbnail: ThumbnailBenchResult(
                sourceWidth: 4000, sourceHeight: 3000, sourceBytes: photo.count, request: "imageView/2/w/200/h/150",
                coldMs: LatencyStats(cold), repeatedMs: LatencyStats(warm)),
            smallUploads: SmallUploadsResult(
                uploads: concurrentUploads, clients: clients, bytesEach: small.count, latencyMs: LatencyStats(latencies),
                uploadsPerSecond: (Double(concurrentUploads) / max(burstSeconds, 0.001)).rounded(), serverCost: smallCost))
    }

    // MARK: HTTP

    /// Uploads with `POST`, streaming `body`; answers the record's JSON.
    private func upload<Body: AsyncSequence & Sendable>(_ http: HTTPClient, _ url: String, token: String, body: Body, length: Int)
        async throws -> [String: Any]
    where Body.Element == ByteBuffer {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "X-LC-IM-Session-Token", value: token)
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        request.body = .stream(body, length: .known(Int64(length)))
        let response = try await http.execute(request, timeout: .seconds(300))
        let answer = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .created else {
            throw BenchError(message: "upload answered \(response.status.code): \(String(buffer: answer))")
        }
        return (try JSONSerialization.jsonObject(with: Data(answer.readableBytesView)) as? [String: Any]) ?? [:]
    }

    /// Downloads with `GET`, counting and dropping the bytes as they come; answers how many.
    private func download(_ http: HTTPClient, _ url: String) async throws -> Int {
        let response = try await http.execute(HTTPClientRequest(url: url), timeout: .seconds(300))
        var count = 0
        for try await part in response.body { count += part.readableBytes }
        guard response.status == .ok else { throw BenchError(message: "GET \(url) answered \(response.status.code)") }
        return count
    }

    // MARK: Bodies and fixtures

    /// `bytes` bytes as 1 MiB buffers that share `chunk`'s storage (the client copies nothing); the first buffer
    /// starts with the round's number, so each round is a content of its own.
    static func largeBody(_ chunk: ByteBuffer, bytes: Int, round: Int) -> AsyncStream<ByteBuffer> {
        AsyncStream { continuation in
            var left = bytes
            var first = true
            while left > 0 {
                var piece = chunk.getSlice(at: chunk.readerIndex, length: min(left, chunk.readableBytes))!
                if first {
                    var stamped = ByteBuffer()
                    stamped.writeString("round \(round) ")
                    stamped.writeBuffer(&piece)
                    piece = stamped.getSlice(at: 0, length: min(left, chunk.readableBytes))!
                    first = false
                }
                left -= piece.readableBytes
                continuation.yield(piece)
            }
            continuation.finish()
        }
    }

    static func oneShot(_ data: Data) -> AsyncStream<ByteBuffer> {
        AsyncStream { continuation in
            continuation.yield(ByteBuffer(bytes: data))
            continuation.finish()
        }
    }

    static func randomBuffer(_ count: Int) -> ByteBuffer {
        var generator = SystemRandomNumberGenerator()
        var buffer = ByteBuffer()
        buffer.reserveCapacity(count)
        for _ in 0..<(count / 8) { buffer.writeInteger(generator.next() as UInt64) }
        return buffer
    }

    /// A JPEG of noise that libvips writes (noise keeps the encoder from making it small: a worst case for the
    /// decoder, larger than a photo of the same size).
    static func noiseImage(_ url: URL, width: Int, height: Int) throws -> Data {
        _ = try? Thumbnailer.header(path: "/dev/null") // starts libvips
        guard hb_vips_write_noise(url.path, Int32(width), Int32(height)) == 0 else {
            throw BenchError(message: "libvips could not write \(url.path)")
        }
        return try Data(contentsOf: url)
    }

    static func megabytesPerSecond(_ bytes: Int, since start: ContinuousClock.Instant) -> Double {
        let seconds = (ContinuousClock.now - start).milliseconds / 1000
        return (Double(bytes) / 1e6 / max(seconds, 1e-6) * 10).rounded() / 10
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }
}

// MARK: - Results

struct MediaBenchResult: Encodable {
    var server: String
    var large: LargeFileResult
    var thumbnail: ThumbnailBenchResult
    var smallUploads: SmallUploadsResult
}

struct LargeFileResult: Encodable {
    var bytes: Int
    var rounds: Int
    /// Medians of the rounds, in MB/s (10^6 bytes).
    var uploadMBPerSecond: Double
    var downloadMBPerSecond: Double
    var uploadRoundsMBPerSecond: [Double]
    var downloadRoundsMBPerSecond: [Double]
    /// The server's memory and CPU in one round (the round whose resident size grew most).
    var uploadCost: PhaseCost
    var downloadCost: PhaseCost
}

struct ThumbnailBenchResult: Encodable {
    var sourceWidth: Int
    var sourceHeight: Int
    var sourceBytes: Int
    var request: String
    /// Each request a size not asked for before: read, decoded and encoded.
    var coldMs: LatencyStats
    /// The same request repeated (a thumbnail cache's hit, when the server has one).
    var repeatedMs: LatencyStats
}

struct SmallUploadsResult: Encodable {
    var uploads: Int
    var clients: Int
    var bytesEach: Int
    /// From each request's start to its whole answer, all started at once.
    var latencyMs: LatencyStats
    var uploadsPerSecond: Double
    var serverCost: PhaseCost
}

/// What one phase cost: the server's resident size in MB (2^20 bytes) before it, at its peak during it and
/// after it, and the CPU seconds of the server's process and of the benchmark's own (the HTTP client).
struct PhaseCost: Encodable {
    var rssBeforeMB: Double = 0
    var rssPeakMB: Double = 0
    var rssAfterMB: Double = 0
    /// peak − before: what the phase made the server hold at once.
    var rssGrowthMB: Double = 0
    /// How the peak was read: `VmHWM` (reset before the phase) or `sampled` (VmRSS every 5 ms).
    var peakFrom = "VmHWM"
    var serverCPUSeconds: Double = 0
    var benchCPUSeconds: Double = 0

    /// Keeps the phase with the largest growth.
    mutating func add(_ other: PhaseCost) {
        if other.rssGrowthMB >= rssGrowthMB || rssBeforeMB == 0 { self = other }
    }
}

extension MediaBenchResult {
    /// Lines for `--summary`.
    var summaryLines: [String] {
        func mb(_ value: Double) -> String { String(format: "%.1f", value) }
        let large = self.large
        func cpu(_ cost: PhaseCost) -> String { "cpu server \(cost.serverCPUSeconds) s, bench \(cost.benchCPUSeconds) s" }
        return [
            "media: \(large.bytes / 1_000_000) MB upload \(mb(large.uploadMBPerSecond)) MB/s (server RSS +\(mb(large.uploadCost.rssGrowthMB)) MB, "
                + "\(cpu(large.uploadCost))), download \(mb(large.downloadMBPerSecond)) MB/s (+\(mb(large.downloadCost.rssGrowthMB)) MB, "
                + "\(cpu(large.downloadCost)))",
            "media: thumbnail of \(thumbnail.sourceWidth)x\(thumbnail.sourceHeight) JPEG cold p50 \(thumbnail.coldMs.p50) ms "
                + "max \(thumbnail.coldMs.max) ms, repeated p50 \(thumbnail.repeatedMs.p50) ms",
            "media: \(smallUploads.uploads) concurrent \(smallUploads.bytesEach / 1000) KB uploads p50 \(smallUploads.latencyMs.p50) ms "
                + "p99 \(smallUploads.latencyMs.p99) ms, \(Int(smallUploads.uploadsPerSecond))/s (server RSS +\(mb(smallUploads.serverCost.rssGrowthMB)) MB, "
                + "\(cpu(smallUploads.serverCost)))",
        ]
    }
}

// MARK: - The server process

/// `hookbot server` (this executable) as a child process on a free loopback port.
final class ServerProcess: Sendable {
    let process: ChildProcess
    let port: Int

    private init(process: ChildProcess, port: Int) {
        self.process = process
        self.port = port
    }

    static func start(directory: URL, maxUploadBytes: Int64, http: HTTPClient) async throws -> ServerProcess {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        for _ in 0..<5 {
            let port = Int.random(in: 30000..<60000)
            let process = try ChildProcess(
                executable,
                [
                    "server", "--port", "\(port)", "--db", directory.appendingPathComponent("server.sqlite").path,
                    "--media-dir", directory.appendingPathComponent("store").path, "--max-upload-bytes", "\(maxUploadBytes)",
                    "--log-level", "error", "--max-connections-per-address", "2048",
                ],
                output: .inherited, error: .inherited)
            for _ in 0..<200 where process.isRunning {
                if let response = try? await http.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/ready"), timeout: .seconds(2)),
                    response.status == .ok
                {
                    _ = try? await response.body.collect(upTo: 4096)
                    return ServerProcess(process: process, port: port)
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            if process.isRunning { process.signal() } // did not answer: try another port
        }
        throw BenchError(message: "hookbot server did not start")
    }

    func stop() {
        process.signal()
        _ = process.waitUntilExit()
    }

    /// A field of /proc/<pid>/status in MB.
    func status(_ field: String) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
            let kilobytes = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return 0 }
        return kilobytes / 1024
    }

    /// Starts watching the server's resident size for one phase.
    func watchMemory() -> MemoryWatch { MemoryWatch(server: self) }
}

/// The server's peak resident size over a phase: `VmHWM` reset at the start (writing 5 to clear_refs), and a
/// sampler of `VmRSS` in case the kernel refuses the reset.
final class MemoryWatch: Sendable {
    let server: ServerProcess
    let before: Double
    let serverCPU: Double
    let benchCPU: Double
    let reset: Bool
    let sampled = Locked(0.0)
    let sampler: Task<Void, Never>

    init(server: ServerProcess) {
        self.server = server
        before = server.status("VmRSS")
        serverCPU = ProcessCPU.seconds(pid: server.process.processIdentifier)
        benchCPU = ProcessCPU.current()
        reset = (try? "5".write(toFile: "/proc/\(server.process.processIdentifier)/clear_refs", atomically: false, encoding: .utf8)) != nil
        let sampled = self.sampled
        sampler = Task {
            while !Task.isCancelled {
                let now = server.status("VmRSS")
                sampled.withLock { $0 = max($0, now) }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    func finish() -> PhaseCost {
        sampler.cancel()
        let after = server.status("VmRSS")
        let peak = reset ? server.status("VmHWM") : max(sampled.withLock { $0 }, after)
        func round(_ value: Double, _ scale: Double = 10) -> Double { (value * scale).rounded() / scale }
        return PhaseCost(
            rssBeforeMB: round(before), rssPeakMB: round(peak), rssAfterMB: round(after), rssGrowthMB: round(max(0, peak - before)),
            peakFrom: reset ? "VmHWM" : "sampled",
            serverCPUSeconds: round(ProcessCPU.seconds(pid: server.process.processIdentifier) - serverCPU, 1000),
            benchCPUSeconds: round(ProcessCPU.current() - benchCPU, 1000))
    }
}

// MARK: - Sessions

/// A logged-in client on a WebSocket (JSON `session open`), kept open while its session token is used.
final class Session: Sendable {
    let token: String
    private let done: AsyncStream<Void>.Continuation
    private let task: Task<Void, Never>

    private init(token: String, done: AsyncStream<Void>.Continuation, task: Task<Void, Never>) {
        self.token = token
        self.done = done
        self.task = task
    }

    static func open(port: Int, clientID: String, logger: Logger) async throws -> Session {
        let (tokens, gotToken) = AsyncStream<String>.makeStream()
        let (finished, done) = AsyncStream<Void>.makeStream()
        let task = Task {
            _ = try? await WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/ws", logger: logger) { inbound, outbound, _ in
                try await outbound.write(.text(#"{"cmd":"session","op":"open","peerId":"\#(clientID)","i":1}"#))
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    guard case .text(let text) = message,
                        let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                        let token = object["st"] as? String
                    else { continue }
                    gotToken.yield(token)
                    break
                }
                for await _ in finished { break }
                try await outbound.close(.normalClosure, reason: nil)
            }
            gotToken.finish()
        }
        for await token in tokens { return Session(token: token, done: done, task: task) }
        throw BenchError(message: "\(clientID) could not log in")
    }

    func close() async {
        done.yield()
        done.finish()
        await task.value
    }
}
