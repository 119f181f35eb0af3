import Foundation
import XCTest

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A headless Chromium driven over WebDriver (W3C protocol) by `chromedriver` from Debian's
/// `chromium-driver` package: started on a free loopback port by the test, stopped by `quit()`.
/// Written here because the protocol needed is a dozen HTTP calls and no Swift WebDriver package is
/// in the mirror.
final class WebDriver: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// An element handle.
    struct Element {
        let id: String
    }

    private let process: Process
    private let base: String
    private let session: String

    /// Where chromedriver and Chromium are installed (`make browser`).
    static let driverPath = "/usr/bin/chromedriver"
    static let browserPath = "/usr/bin/chromium"

    static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: driverPath) && FileManager.default.isExecutableFile(atPath: browserPath)
    }

    /// Starts chromedriver and a headless browser window of `width`×`height`.
    static func start(width: Int = 1280, height: Int = 800) async throws -> WebDriver {
        let port = try freePort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: driverPath)
        process.arguments = ["--port=\(port)", "--allowed-ips=127.0.0.1"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let base = "http://127.0.0.1:\(port)"
        do {
            let deadline = ContinuousClock.now + .seconds(20)
            while true {
                if let status = try? await call(base, "GET", "/status"), (status["ready"] as? Bool) == true { break }
                guard ContinuousClock.now < deadline else { throw Failure(description: "chromedriver did not start") }
                try await Task.sleep(for: .milliseconds(50))
            }
            let capabilities: [String: Any] = ["capabilities": ["alwaysMatch": [
                "browserName": "chrome",
                "goog:loggingPrefs": ["browser": "ALL"],
                "goog:chromeOptions": [
                    "binary": browserPath,
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--window-size=\(width),\(height)", "--no-first-run", "--disable-extensions"],
                ],
            ]]]
            let created = try await call(base, "POST", "/session", capabilities)
            guard let session = created["sessionId"] as? String else {
                throw Failure(description: "no session from chromedriver: \(created)")
            }
            return WebDriver(process: process, base: base, session: session)
        } catch {
            process.terminate()
            throw error
        }
    }

    private init(process: Process, base: String, session: String) {
        self.process = process
        self.base = base
        self.session = session
    }

    /// Ends the browser session and chromedriver.
    func quit() async {
        _ = try? await command("DELETE", "")
        process.terminate()
        process.waitUntilExit()
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
               let value = found["value"] as? [String: Any], let id = value.values.first as? String {
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
        var request = URLRequest(url: URL(string: base + path)!)
        request.httpMethod = method
        request.timeoutInterval = 60
        if let body {
            request.httpBody = try JSONSerialization.data(withJSONObject: body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        let value = object["value"]
        if (response as? HTTPURLResponse)?.statusCode ?? 500 >= 400 {
            let message = (value as? [String: Any])?["message"] as? String ?? String(decoding: data, as: UTF8.self)
            throw Failure(description: "WebDriver \(method) \(path): \(message)")
        }
        if path == "/session", let value = value as? [String: Any] { return value }
        if let value = value as? [String: Any], path == "/status" { return value }
        return ["value": value as Any]
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
