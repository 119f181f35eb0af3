import IMCore

/// What `hookbot plugins`, `hookbot plugins --stats` and `hookbot reload` print: the admin socket's JSON
/// answers (the admin API's `PluginView`, `BotStats`, `ReloadView`) as tables for people (`--json` prints the
/// JSON itself, for scripts).
enum AdminOutput {
    /// `plugins`: one row per plugin.
    static func plugins(_ json: String) -> String {
        guard case .array(let plugins)? = JSONValue.parse(json) else { return json }
        guard !plugins.isEmpty else { return "no plugins are loaded\n" }
        var rows = [["PLUGIN", "STATE", "PRIORITY", "HOOKS", "TIMERS", "FAILURES", "LAST ERROR"]]
        for plugin in plugins {
            let hooks = plugin["hooks"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
            rows.append([
                plugin["name"]?.stringValue ?? "?", plugin["state"]?.stringValue ?? "?", number(plugin["priority"]),
                hooks.isEmpty ? "-" : hooks.joined(separator: ","), number(plugin["timers"]),
                "\(number(plugin["consecutiveFailures"])) in a row, \(number(plugin["totalFailures"])) in all",
                plugin["lastError"]?["description"]?.stringValue ?? "-",
            ])
        }
        return table(rows)
    }

    /// `reload`: each plugin with what happened to it, then the failures.
    static func reload(_ json: String) -> String {
        guard case .object(let report)? = JSONValue.parse(json) else { return json }
        if let error = report["error"]?.stringValue { return "error: \(error)\n" }
        var rows = [["PLUGIN", "RESULT"]]
        for (key, result) in [("loaded", "loaded"), ("reloaded", "reloaded"), ("unloaded", "unloaded")] {
            for name in report[key]?.arrayValue?.compactMap(\.stringValue) ?? [] { rows.append([name, result]) }
        }
        let errors = report["errors"]?.arrayValue?.compactMap { $0["description"]?.stringValue } ?? []
        var text = rows.count > 1 ? table(rows) : "nothing changed\n"
        if !errors.isEmpty {
            text += "\(errors.count) failed (a plugin that was running keeps its old version):\n"
            for error in errors { text += "  \(error)\n" }
        }
        return text
    }

    /// `plugins --stats`: one counter per line.
    static func stats(_ json: String) -> String {
        guard case .object(let stats)? = JSONValue.parse(json) else { return json }
        return table([["COUNTER", "VALUE"]] + stats.keys.sorted().map { [$0, stats[$0].map(text) ?? ""] })
    }

    private static func number(_ value: JSONValue?) -> String { value.map(text) ?? "-" }

    private static func text(_ value: JSONValue) -> String {
        if let string = value.stringValue { return string }
        if let int = value.intValue { return String(int) }
        return value.jsonString()
    }

    /// Columns padded to their widest cell (counted in characters), two spaces apart.
    static func table(_ rows: [[String]]) -> String {
        let columns = rows.map(\.count).max() ?? 0
        let widths = (0..<columns).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }
}
