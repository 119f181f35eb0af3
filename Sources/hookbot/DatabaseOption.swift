import ArgumentParser
import Foundation

/// `--database`: the PostgreSQL store instead of the SQLite file, for `hookbot server` and `hookbot bench`; one option
/// group, so its help and its checking are written once.
struct DatabaseOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "A PostgreSQL URL (postgres://user:password@host:port/database, optionally ?schema=NAME) instead of SQLite (see docs/DEPLOY.md). May be env:VARIABLE.",
            valueName: "url"))
    var database: String?

    /// The URL given (an `env:VARIABLE` read), or nil for SQLite.
    func url() throws -> String? { try database.map(Self.url) }

    /// A `--database` value: a PostgreSQL URL, or `env:VARIABLE` naming one (it carries a password).
    static func url(_ value: String) throws -> String {
        var url = value
        if value.hasPrefix("env:") {
            let name = String(value.dropFirst(4))
            guard let set = ProcessInfo.processInfo.environment[name], !set.isEmpty else {
                throw ValidationError("--database: environment variable \(name) is not set")
            }
            url = set
        }
        guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else {
            throw ValidationError("--database takes a postgres:// URL (use --db for a SQLite file)")
        }
        return url
    }
}
