import FuzzSupport
import HookbotConfig

/// libFuzzer target: any text given to the `hookbot.toml` loader is read or refused with a
/// `ConfigurationError`, never a crash; the line of every key it read can be looked up.
func fuzzTOMLConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let file = try? ConfigFile(text: text) else { return 0 }
    for (key, value) in file.root {
        _ = file.line(of: key)
        if case .object(let table) = value {
            for inner in table.keys { _ = file.line(of: "\(key).\(inner)") }
        }
    }
    return 0
}

@main
struct FuzzTOMLConfig {
    static func main() throws { try fuzzMain(fuzzTOMLConfig) }
}
