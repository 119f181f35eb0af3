import Foundation

/// The Lua code run in every fresh plugin state before the plugin itself: `Resources/prelude.lua`
/// (a resource so that editors, linters and `luac -p` in `make lint` see it as Lua), read once.
/// Nil when it cannot be found; loading a plugin then fails with a clear error.
///
/// Looked up by hand rather than through SwiftPM's `Bundle.module`, whose accessor ends the process
/// (`fatalError`) when the resource bundle is missing, as it is for a binary copied away from its build
/// directory: first the bundle next to the executable (where `swift build` puts it, also for the test
/// bundle), then the source tree the binary was built from.
let hookbotPrelude: String? = {
    let executableDirectories = [
        Bundle.main.bundleURL,
        URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath().deletingLastPathComponent(),
    ]
    for directory in executableDirectories {
        for name in ["hookbot_HookRuntime.resources", "hookbot_HookRuntime.bundle"] {
            if let url = Bundle(url: directory.appendingPathComponent(name))?.url(forResource: "prelude", withExtension: "lua"),
                let text = try? String(contentsOf: url, encoding: .utf8)
            {
                return text
            }
        }
    }
    let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Resources/prelude.lua")
    return try? String(contentsOf: source, encoding: .utf8)
}()
