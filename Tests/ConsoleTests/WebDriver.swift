import Foundation
import HookbotTestSupport
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A headless Chromium driven over WebDriver (W3C protocol) by `chromedriver` from Debian's
/// `chromium-driver` package: started on a free loopback port by the test, stopped by `quit()`.
/// Written here because the protocol needed is a dozen HTTP calls and no Swift WebDriver package is
/// in the mirror. The HTTP is a minimal HTTP/1.1 exchange of its own: chromedriver writes headers
/// without a space after the colon, which URLSession on Linux rejects ("Failed writing header").
final class WebDriver: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// An element handle.
    struct Element {
        let id: String
    }

    private let process: ChildProcess
    private let base: String
    private let session: String
    /// The browser's temporary directory (its profile, its singleton socket), removed when this driver goes away:
    /// Chromium left a few MB there per session when it was the system's.
    private let temporary: MadeDirectory

    /// Where chromedriver and Chromium are installed (`make browser`).
    static let driverPath = "/usr/bin/chromedriver"
    static let browserPath = "/usr/bin/chromium"

    static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: driverPath) && FileManager.default.isExecutableFile(atPath: browserPath)
    }

    /// Starts chromedriver and a headless browser window of `width`×`height`.
    static func start(width: Int = 1280, height: Int = 800) async throws -> WebDriver {
        let port = try freePort()
        let temporary = try MadeDirectory("hookbot-browser")
        let process = try ChildProcess(
            URL(fileURLWithPath: driverPath), ["--port=\(port)", "--allowed-ips=127.0.0.1"], environment: ["TMPDIR": temporary.url.path],
            output: .discarded, error: .discarded)
        let base = "http://127.0.0.1:\(port)"
        do {
            let deadline = ContinuousClock.now + .seconds(20)
            var last = ""
            while true {
                do {
                    let status = try await call(base, "GET", "/status")
                    if (status["ready"] as? Bool) == true { break }
                    last = "\(status)"
                } catch {
                    last = "\(error)"
                }
                guard ContinuousClock.now < deadline else { throw Failure(description: "chromedriver did not start: \(last)") }
                try await Task.sleep(for: .milliseconds(50))
            }
            let capabilities: [String: Any] = [
                "capabilities": [
                    "alwaysMatch": [
                        "browserName": "chrome",
                        "goog:loggingPrefs": ["browser": "ALL"],
                        "goog:chromeOptions": [
                            "binary": browserPath,
                            "args": [
                                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                "--window-size=\(width),\(height)", "--no-first-run", "--disable-extensions",
                            ],
                        ],
                    ]
                ]
            ]
            let created = try await call(base, "POST", "/session", capabilities)
            guard let session = created["sessionId"] as? String else {
                throw Failure(description: "no session from chromedriver: \(created)")
            }
            return WebDriver(process: process, base: base, session: session, temporary: temporary)
        } catch {
            await stop(process)
            throw error
        }
    }

    private init(process: ChildProcess, base: String, session: String, temporary: MadeDirectory) {
        self.process = process
        self.base = base
        self.session = session
        self.temporary = temporary
    }

    /// Stops chromedriver (and with it the browser).
    private static func stop(_ process: ChildProcess) async {
        process.signal()
        if (try? await process.waitForExit(timeout: .seconds(5))) == nil { process.signal(SIGKILL) }
    }

    /// Ends the browser session and chromedriver.
    func quit() async {
        _ = try? await command("DELETE", "")
        await Self.stop(process)
    }

    func open(_ url: String) async throws { _ = try await command("POST", "/url", ["url": url]) }

    func resize(width: Int, height: Int) async throws {
        _ = try await command("POST", "/window/rect", ["width": width, "height": height])
    }

    /// The first element matching a CSS selector, waiting up to `timeout` for it to exist.
    func element(_ selector: String, timeout: Duration = .seconds(10)) async throws -> Element {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let found = try? await command("POST", "/element", ["using": "css selector", "value": selector]),
                let value = found["value"] as? [String: Any], let id = value.values.first as? String
            {
                return Element(id: id)
            }
            guard ContinuousClock.now < deadline else { throw Failure(description: "no element \(selector)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    func click(_ selector: String) async throws {
        let element = try await element(selector)
        _ = try await command("POST", "/element/\(element.id)/click", [:])
    }

    func type(_ text: String, into selector: String) async throws {
        let element = try await element(selector)
        _ = try await command("POST", "/element/\(element.id)/clear", [:])
        _ = try await command("POST", "/element/\(element.id)/value", ["text": text])
    }

    func text(_ selector: String) async throws -> String {
        let element = try await element(selector)
        return try await command("GET", "/element/\(element.id)/text")["value"] as? String ?? ""
    }

    /// Runs JavaScript in the page and returns its result.
    func script(_ source: String, _ arguments: [Any] = []) async throws -> Any? {
        try await command("POST", "/execute/sync", ["script": source, "args": arguments])["value"]
    }

    /// Waits until the script returns true.
    func waitUntil(_ what: String, timeout: Duration = .seconds(15), _ source: String, _ arguments: [Any] = []) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await script(source, arguments) as? Bool == true { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw Failure(description: "timed out waiting for \(what)")
    }

    /// A PNG of the window.
    func screenshot() async throws -> Data {
        guard let encoded = try await command("GET", "/screenshot")["value"] as? String, let data = Data(base64Encoded: encoded) else {
            throw Failure(description: "no screenshot")
        }
        return data
    }

    /// The browser console's entries since the last call (`level`, `message`).
    func consoleLog() async throws -> [[String: Any]] {
        try await command("POST", "/se/log", ["type": "browser"])["value"] as? [[String: Any]] ?? []
    }

    private func command(_ method: String, _ path: String, _ body: [String: Any]? = nil) async throws -> [String: Any] {
        try await Self.call(base, method, "/session/\(session)\(path)", body)
    }

    /// One WebDriver request; returns the answer's JSON object, or throws the WebDriver error it carries.
    private static func call(_ base: String, _ method: String, _ path: String, _ body: [String: Any]? = nil) async throws -> [String: Any] {
        let payload = try body.map { try JSONSerialization.data(withJSONObject: $0) }
        let port = Int(base.split(separator: ":").last ?? "") ?? 0
        let (status, data) = try await exchange(port: port, method: method, path: path, body: payload)
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        let value = object["value"]
        if status >= 400 {
            let message = (value as? [String: Any])?["message"] as? String ?? String(decoding: data, as: UTF8.self)
            throw Failure(description: "WebDriver \(method) \(path): \(message)")
        }
        if path == "/session", let value = value as? [String: Any] { return value }
        if let value = value as? [String: Any], path == "/status" { return value }
        return ["value": value as Any]
    }

    /// One HTTP/1.1 request to 127.0.0.1 with `Connection: close`, on a thread of its own (the socket calls
    /// block); returns the status and the body.
    private static func exchange(port: Int, method: String, path: String, body: Data?) async throws -> (Int, Data) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try blockingExchange(port: port, method: method, path: path, body: body) })
            }
        }
    }

    private static func blockingExchange(port: Int, method: String, path: String, body: Data?) throws -> (Int, Data) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "no socket") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 120, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure(description: "cannot connect to 127.0.0.1:\(port)") }
        var request = Data("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n".utf8)
        if let body { request.append(Data("Content-Type: application/json\r\nContent-Length: \(body.count)\r\n".utf8)) }
        request.append(Data("\r\n".utf8))
        if let body { request.append(body) }
        var sent = 0
        while sent < request.count {
            let written = request.withUnsafeBytes { write(fd, $0.baseAddress! + sent, request.count - sent) }
            guard written > 0 else { throw Failure(description: "write to chromedriver failed") }
            sent += written
        }
        // Reads until the body announced by Content-Length is complete (chromedriver keeps connections
        // open whatever the request says), or until the connection closes.
        var response = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        var expected: Int?
        while expected.map({ response.count < $0 }) ?? true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 { throw Failure(description: "read from chromedriver failed (errno \(errno))") }
            if count == 0 { break }
            response.append(contentsOf: buffer[0..<count])
            if expected == nil, let end = response.range(of: Data("\r\n\r\n".utf8)) {
                let head = String(decoding: response[..<end.lowerBound], as: UTF8.self).lowercased()
                if let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                    let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
                {
                    expected = end.upperBound - response.startIndex + length
                }
            }
        }
        guard let end = response.range(of: Data("\r\n\r\n".utf8)) else { throw Failure(description: "no HTTP answer") }
        let head = String(decoding: response[..<end.lowerBound], as: UTF8.self)
        let statusLine = head.split(separator: "\r\n").first ?? ""
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw Failure(description: "bad status line \(statusLine)") }
        return (status, Data(response[end.upperBound...]))
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw Failure(description: "no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
