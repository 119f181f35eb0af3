import Foundation
import Hummingbird
import IMServer

/// The console page's files (`Resources/`), read once at start; with `HOOKBOT_CONSOLE_DIR` set, read
/// from that folder at every request instead, so the page can be edited while the bot runs.
struct ConsoleAssets: Sendable {
    private let files: [String: Data]
    private let liveDirectory: URL?

    static let contentTypes = [
        "html": "text/html; charset=utf-8", "css": "text/css; charset=utf-8",
        "js": "text/javascript; charset=utf-8", "svg": "image/svg+xml", "png": "image/png", "ico": "image/x-icon",
        "json": "application/json",
    ]

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let live = environment["HOOKBOT_CONSOLE_DIR"], !live.isEmpty {
            liveDirectory = URL(fileURLWithPath: live)
            files = [:]
            return
        }
        liveDirectory = nil
        var files: [String: Data] = [:]
        if let directory = Bundle.module.url(forResource: "Resources", withExtension: nil),
            let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path)
        {
            for name in names where Self.isServable(name) {
                files[name] = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
            }
        }
        self.files = files
    }

    /// Plain file names with a known extension: no folders, no hidden files, nothing to traverse with.
    static func isServable(_ name: String) -> Bool {
        guard !name.hasPrefix("."), name.allSatisfy({ $0.isLetter || $0.isNumber || "._-".contains($0) }) else { return false }
        return contentTypes[(name as NSString).pathExtension] != nil
    }

    func response(for name: String) -> Response {
        guard Self.isServable(name) else { return HTTPJSON.error(.notFound, "no such file") }
        let data: Data? =
            if let liveDirectory {
                FileManager.default.contents(atPath: liveDirectory.appendingPathComponent(name).path)
            } else {
                files[name]
            }
        guard let data else { return HTTPJSON.error(.notFound, "no such file") }
        let type = Self.contentTypes[(name as NSString).pathExtension] ?? "application/octet-stream"
        return Response(
            status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
