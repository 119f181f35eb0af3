import Foundation
import HookRuntime
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A Unix socket on which `hookbot reload` and `hookbot plugins` reach a running bot: one line in
/// (`reload`, `plugins` or `stats`), one JSON document out.
public final class AdminSocket: @unchecked Sendable {
    private let path: String
    private let descriptor: Int32
    private let logger: Logger

    /// Binds the socket (replacing a stale one) and serves requests on a background thread.
    public init(path: String, bot: BotHost, logger: Logger) throws {
        self.path = path
        self.logger = logger
        unlink(path)
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ConfigurationError(message: "cannot create the admin socket") }
        var address = Self.address(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(descriptor, 8) == 0 else {
            close(descriptor)
            throw ConfigurationError(message: "cannot listen on \(path): \(String(cString: strerror(errno)))")
        }
        let fd = descriptor
        Thread.detachNewThread {
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 { return }
                let request = Self.readLine(client)
                let semaphore = DispatchSemaphore(value: 0)
                let reply = Box()
                Task {
                    reply.text = await Self.answer(request, bot: bot)
                    semaphore.signal()
                }
                semaphore.wait()
                Self.writeAll(client, reply.text + "\n")
                close(client)
            }
        }
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
        unlink(path)
    }

    /// Sends one request to a running bot and returns its answer.
    public static func request(_ line: String, path: String) throws -> String {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ConfigurationError(message: "cannot create a socket") }
        defer { close(fd) }
        var address = address(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            throw ConfigurationError(message: "no bot is listening on \(path) (is `hookbot run` running in this directory?)")
        }
        writeAll(fd, line + "\n")
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: data, as: UTF8.self)
    }

    private final class Box: @unchecked Sendable { var text = "" }

    private static func answer(_ request: String, bot: BotHost) async -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        func json(_ value: some Encodable) -> String {
            (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }
        switch request.trimmingCharacters(in: .whitespacesAndNewlines) {
        case "reload":
            let report = await bot.reload()
            return json(AdminReport(report))
        case "plugins":
            return json(await bot.runtime.plugins.map(AdminPlugin.init))
        case "stats":
            return json(await bot.statistics)
        default:
            return json(["error": "unknown request; use reload, plugins or stats"])
        }
    }

    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8.prefix(MemoryLayout.size(ofValue: address.sun_path) - 1))
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        return address
    }

    private static func readLine(_ fd: Int32) -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < 1024, read(fd, &byte, 1) == 1, byte != 10 { bytes.append(byte) }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func writeAll(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written <= 0 { return }
            bytes = bytes.dropFirst(written)
        }
    }
}

struct AdminReport: Encodable {
    var loaded: [String]
    var reloaded: [String]
    var unloaded: [String]
    var errors: [String]

    init(_ report: ReloadReport) {
        loaded = report.loaded
        reloaded = report.reloaded
        unloaded = report.unloaded
        errors = report.errors.map(\.description)
    }
}

struct AdminPlugin: Encodable {
    var name: String
    var state: String
    var priority: Int
    var hooks: [String]
    var timers: Int
    var consecutiveFailures: Int
    var totalFailures: Int
    var lastError: String?

    init(_ status: PluginStatus) {
        name = status.name
        state = "\(status.state)"
        priority = status.priority
        hooks = status.hooks
        timers = status.timers
        consecutiveFailures = status.consecutiveFailures
        totalFailures = status.totalFailures
        lastError = status.lastError?.description
    }
}
