import Foundation

/// Values settings take in `hookbot.toml` and on the command line, checked the same way in both.
public enum SettingValues {
    /// A byte size: an integer (bytes) or a string `"100 MiB"`, `"512KiB"`, `"2 GB"`, `"1.5 GiB"` (KiB, MiB,
    /// GiB, TiB are powers of 1024; KB, MB, GB, TB of 1000; `B` or no unit: bytes). Nil when it is not one.
    public static func byteSize(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let number = trimmed.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        let unit = trimmed.dropFirst(number.count).trimmingCharacters(in: .whitespaces).lowercased()
        guard !number.isEmpty, let value = Double(number), value.isFinite, value >= 0 else { return nil }
        let multipliers: [String: Double] = [
            "": 1, "b": 1, "kib": 1024, "mib": 1_048_576, "gib": 1_073_741_824, "tib": 1_099_511_627_776, "kb": 1e3, "mb": 1e6,
            "gb": 1e9, "tb": 1e12,
        ]
        guard let multiplier = multipliers[unit] else { return nil }
        let bytes = (value * multiplier).rounded()
        guard bytes < 9e18 else { return nil }
        return Int64(bytes)
    }

    /// A duration: seconds (an integer, or a string `"90"`), or a number with `s`, `m`, `h` or `d`: `"90s"`,
    /// `"30m"`, `"24h"`, `"7d"` (fractions allowed). Nil for anything else or a negative value.
    public static func duration(_ text: String) -> Duration? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var number = Substring(text.trimmingCharacters(in: .whitespaces))
        var scale = 1.0
        if let last = number.last, let unit = units[last] {
            scale = unit
            number = number.dropLast()
        }
        guard let value = Double(number), value.isFinite, value >= 0, value * scale < 1e12 else { return nil }
        return .milliseconds(Int64((value * scale * 1000).rounded()))
    }

    /// Why a value was refused.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// A public URL (`[server] public_url`, `--public-url`): `http` or `https`, a host, an optional port and
    /// path prefix, no credentials, query or fragment; answered without a trailing `/`, the scheme and host
    /// lowercased.
    public static func publicURL(_ text: String) -> Result<String, Problem> {
        guard text.utf8.count <= 512 else { return .failure(Problem("is longer than 512 bytes")) }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else { return .failure(Problem("must be an http:// or https:// URL (e.g. https://chat.example.com)")) }
        guard let host = components.host, !host.isEmpty else { return .failure(Problem("has no host")) }
        guard components.user == nil, components.password == nil, components.query == nil, components.fragment == nil else {
            return .failure(Problem("may not carry credentials, a query or a fragment"))
        }
        var path = components.percentEncodedPath
        while path.hasSuffix("/") { path.removeLast() }
        let port = components.port.map { ":\($0)" } ?? ""
        let hostText = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host.lowercased()
        return .success("\(scheme)://\(hostText)\(port)\(path)")
    }
}
