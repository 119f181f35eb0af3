import Foundation
import IMCore

/// One readable line per message, for terminals, logs and notifications (`hookbot chat` prints these):
///
///     alice: hello
///     alice sent photo.png (640×480, 12 KB) http://127.0.0.1:8080/media/…/photo.png
///     alice sent audio voice.m4a (0:07, 80 KB) http://…
///     alice sent video clip.mp4 (1280×720, 1:02, 5.3 MB) http://…
///     alice sent a location 48.8566, 2.3522 — the café
///     alice sent type 7: {"question":"lunch?"}
extension IMMessage {
    /// This message as one line; a file's `/media/…` path is made absolute against `mediaBase`.
    public func summary(mediaBase: URL? = nil) -> String {
        if isRecalled { return "\(from) recalled a message" }
        if let binary { return "\(from) sent \(IMMediaSummary.bytes(Int64(binary.count))) of binary data" }
        guard let typed = content.typedMessage else { return "\(from): \(body)" }
        return "\(from)" + IMMediaSummary.describe(typed, mediaBase: mediaBase)
    }
}

enum IMMediaSummary {
    /// What follows the sender's name.
    static func describe(_ typed: TypedMessage, mediaBase: URL?) -> String {
        let caption = typed.text.map { $0.isEmpty ? "" : " — \($0)" } ?? ""
        switch typed.builtinType {
        case .text:
            return ": \(typed.text ?? "")"
        case .image, .audio, .video, .file:
            let kind = typed.builtinType ?? .file
            let word = kind == .audio || kind == .video ? "\(kind.name) " : ""
            guard let file = typed.file else {
                return " sent \(kind == .image || kind == .audio ? "an" : "a") \(kind.name) with no file\(caption)"
            }
            var details: [String] = []
            if let width = file.width, let height = file.height { details.append("\(width)×\(height)") }
            if let duration = file.duration, kind == .audio || kind == .video { details.append(clock(duration)) }
            if let size = file.size { details.append(bytes(size)) }
            let name = file.name ?? URL(string: file.url)?.lastPathComponent ?? "a file"
            let parenthesised = details.isEmpty ? "" : " (\(details.joined(separator: ", ")))"
            return " sent \(word)\(name)\(parenthesised) \(IMMediaAddress.absolute(file.url, base: mediaBase))\(caption)"
        case .location:
            guard let location = typed.location else { return " sent a location with no coordinates\(caption)" }
            return " sent a location \(coordinate(location.latitude)), \(coordinate(location.longitude))\(caption)"
        case .recalled:
            return " recalled a message"
        case nil:
            var rest = typed.fields.isEmpty ? "" : JSONValue.object(typed.fields).jsonString()
            if let text = typed.text, !text.isEmpty { rest = rest.isEmpty ? text : "\(text) \(rest)" }
            if rest.count > 120 { rest = rest.prefix(119) + "…" }
            return " sent type \(typed.type)" + (rest.isEmpty ? "" : ": \(rest)")
        }
    }

    /// `512 B`, `12 KB`, `1.5 MB` (1024-based, as file managers show them).
    static func bytes(_ count: Int64) -> String {
        guard count >= 1024 else { return "\(count) B" }
        var value = Double(count) / 1024
        var unit = 0
        let units = ["KB", "MB", "GB", "TB"]
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        let number = value < 10 ? String(format: "%.1f", value) : String(Int(value.rounded()))
        return "\(number) \(units[unit])"
    }

    /// `0:07`, `1:02`, `1:00:05`.
    static func clock(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        let (h, m, s) = (total / 3600, total / 60 % 60, total % 60)
        return h > 0 ? String(format: "%d:%02d:%02d", h, m, s) : String(format: "%d:%02d", m, s)
    }

    /// At most 6 decimals, trailing zeros dropped.
    static func coordinate(_ value: Double) -> String {
        var text = String(format: "%.6f", value)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }
}
