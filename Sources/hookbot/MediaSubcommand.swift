import ArgumentParser
import Foundation
import HookbotConfig
import IMServer

/// `hookbot media`: the server's stored files (docs/MEDIA.md).
struct MediaSubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "media", abstract: "Manage uploaded files.", subcommands: [MediaGCSubcommand.self])
}

/// `hookbot media gc`: deletes the files no stored message or conversation references, once older than the
/// grace period (docs/MEDIA.md, "Retention"). Safe beside a running server on the same database.
struct MediaGCSubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Delete uploaded files that no stored message or conversation references, once older than the grace period.")

    @Option(help: "SQLite database file of the server.") var db = "hookbot.sqlite"
    @Option(
        name: [.customLong("database"), .customLong("postgres")],
        help: ArgumentHelp("The server's PostgreSQL URL instead of --db (may be env:VARIABLE).", valueName: "url"))
    var database: String?
    @Option(help: ArgumentHelp("Directory of uploaded files; default: media beside --db.", valueName: "dir"))
    var mediaDir: String?
    @Option(help: "Only files older than this are collected: seconds, or a number with s, m, h or d (0: all unreferenced).")
    var grace = "24h"
    @Flag(help: "List what would be deleted; delete nothing.") var dryRun = false
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "warning"

    func run() async throws {
        guard let grace = SettingValues.duration(grace) else {
            throw ValidationError("--grace takes seconds or a number with s, m, h or d (24h, 30m, 0), got '\(grace)'")
        }
        var configuration = ServerConfiguration()
        configuration.databasePath = db
        configuration.databaseURL = try database.map(DatabaseOption.url)
        configuration.media.directory = mediaDir
        if database == nil, !FileManager.default.fileExists(atPath: db) {
            throw ValidationError("no database at \(db) (give the server's --db file, or --database for PostgreSQL)")
        }
        let logger = makeLogger(label: "hookbot.media", level: logLevel)
        let dates = ISO8601DateFormatter()
        let result = try await MediaRetention.collect(configuration, grace: grace, dryRun: dryRun, logger: logger) { file in
            let created = dates.string(from: Date(timeIntervalSince1970: Double(file.createdAt) / 1000))
            print("\(file.id)\t\(file.size)\t\(created)\t\(file.owner.isEmpty ? "-" : file.owner)\t\(file.name)")
        }
        let files = result.count == 1 ? "1 file" : "\(result.count) files"
        print(dryRun ? "would remove \(files), \(result.bytes) bytes (dry run)" : "removed \(files), \(result.bytes) bytes")
    }
}
