/// Caps on the text a plugin can make the host keep beyond one call (log entries, error texts, headers of
/// HTTP calls), so that no plugin can grow the host's memory through them: past its cap a text is cut at a
/// character boundary and marked with how many bytes were dropped.
public enum StoredText {
    /// A `ctx.log` message, and any entry of the bot's log ring (`LogBuffer`).
    public static let maxLogEntryBytes = 4096
    /// The message of a plugin's error (`HookError`): what the console and `hookbot plugins` keep as a
    /// plugin's last error, and reload reports.
    public static let maxErrorBytes = 4096
    /// Headers of one `ctx.http` request (names and values together), and of a response as the plugin
    /// gets it.
    public static let maxHeaderBytes = 16 * 1024
    /// Headers of one `ctx.http` request or response, by count.
    public static let maxHeaderCount = 64

    /// `text` if it fits in `limit` UTF-8 bytes; else its longest prefix of whole characters (Unicode
    /// scalars) that leaves room for ` … [N bytes cut]` within `limit` bytes, followed by it. A text cut
    /// once passes a second cut to the same limit unchanged.
    public static func cut(_ text: String, to limit: Int) -> String {
        let total = text.utf8.count
        guard total > limit else { return text }
        let room = limit - " … [\(total) bytes cut]".utf8.count
        var kept = 0
        var end = text.unicodeScalars.startIndex
        for scalar in text.unicodeScalars {
            let width = UTF8.width(scalar)
            guard kept + width <= room else { break }
            kept += width
            end = text.unicodeScalars.index(after: end)
        }
        return String(text.unicodeScalars[..<end]) + " … [\(total - kept) bytes cut]"
    }
}

extension HookError.Reason {
    /// The reason with its text cut to `StoredText.maxErrorBytes` (an error a plugin raises with a huge
    /// message is kept as the plugin's last error, in reload reports and in the log).
    func cut() -> Self {
        let limit = StoredText.maxErrorBytes
        switch self {
        case .compile(let text): return .compile(StoredText.cut(text, to: limit))
        case .invalidPlugin(let text): return .invalidPlugin(StoredText.cut(text, to: limit))
        case .runtime(let text): return .runtime(StoredText.cut(text, to: limit))
        case .invalidResult(let text): return .invalidResult(StoredText.cut(text, to: limit))
        case .io(let text): return .io(StoredText.cut(text, to: limit))
        case .config(let key, let text): return .config(key: StoredText.cut(key, to: 256), message: StoredText.cut(text, to: limit))
        case .instructionBudget, .deadline, .memory, .timerBudget: return self
        }
    }
}
