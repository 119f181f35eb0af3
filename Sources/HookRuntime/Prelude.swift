import Foundation

/// The Lua code run in every fresh plugin state before the plugin itself: `Resources/prelude.lua`
/// (a resource so that editors, linters and `luac -p` in `make lint` see it as Lua), read once.
/// Nil when the resource bundle cannot be read; loading a plugin then fails with a clear error.
let hookbotPrelude: String? = {
    guard let url = Bundle.module.url(forResource: "prelude", withExtension: "lua") else { return nil }
    return try? String(contentsOf: url, encoding: .utf8)
}()
