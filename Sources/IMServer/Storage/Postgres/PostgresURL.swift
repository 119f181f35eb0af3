import Foundation
import PostgresNIO

/// A parsed `postgres://user:password@host:port/database?schema=NAME` URL (also `postgresql://`): where the
/// shared store lives, which schema holds its tables, and the `NOTIFY` channel of the cluster.
///
/// Only plain TCP: `sslmode=disable` is the one accepted `sslmode`. User, password and database are
/// percent-decoded; the port defaults to 5432, the schema to `public`, the database to the user's name.
struct PostgresURL: Sendable {
    /// What is wrong with a URL (never repeats the password).
    struct Error: Swift.Error, CustomStringConvertible {
        var reason: String
        var description: String { "invalid PostgreSQL URL: \(reason)" }
    }

    var host: String
    var port: Int
    var username: String
    var password: String?
    var database: String?
    /// The schema of the tables, lowercased (as PostgreSQL folds an unquoted name).
    var schema: String
    /// The `LISTEN`/`NOTIFY` channel of the nodes sharing this schema: `hookbot_<schema>`.
    var channel: String

    /// PostgreSQL's longest identifier, in bytes; the channel name is one.
    static let maxIdentifierBytes = 63
    static let channelPrefix = "hookbot_"

    init(_ text: String) throws {
        guard let scheme = text.range(of: "://").map({ text[..<$0.lowerBound].lowercased() }) else {
            throw Error(reason: "expected postgres://user:password@host:port/database")
        }
        guard scheme == "postgres" || scheme == "postgresql" else {
            throw Error(reason: "unsupported scheme '\(scheme)' (use postgres:// or postgresql://)")
        }
        guard let components = URLComponents(string: text) else {
            throw Error(reason: "malformed URL (check that special characters in user and password are percent-encoded)")
        }
        guard let rawHost = components.percentEncodedHost, !rawHost.isEmpty else { throw Error(reason: "no host") }
        var host = rawHost.removingPercentEncoding ?? rawHost
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.host = host
        if let port = components.port {
            guard (1...65535).contains(port) else { throw Error(reason: "port \(port) is out of range") }
            self.port = port
        } else {
            port = 5432
        }
        guard let user = components.percentEncodedUser, !user.isEmpty else { throw Error(reason: "no user name (postgres://user@host/…)") }
        guard let decodedUser = user.removingPercentEncoding else { throw Error(reason: "the user name has an invalid percent-encoding") }
        username = decodedUser
        if let rawPassword = components.percentEncodedPassword {
            guard let decoded = rawPassword.removingPercentEncoding else {
                throw Error(reason: "the password has an invalid percent-encoding")
            }
            password = decoded
        } else {
            password = nil
        }
        var path = components.percentEncodedPath
        if path.hasPrefix("/") { path.removeFirst() }
        guard let decodedPath = path.removingPercentEncoding else {
            throw Error(reason: "the database name has an invalid percent-encoding")
        }
        guard !decodedPath.contains("/") else { throw Error(reason: "the path must be a single database name, not '\(decodedPath)'") }
        database = decodedPath.isEmpty ? nil : decodedPath

        var schema = "public"
        for item in components.queryItems ?? [] {
            let value = item.value ?? ""
            switch item.name {
            case "schema":
                schema = value
            case "sslmode":
                guard value == "disable" else {
                    throw Error(reason: "sslmode '\(value)' is not supported: TLS is not available, only sslmode=disable")
                }
            default:
                throw Error(reason: "unknown parameter '\(item.name)' (supported: schema, sslmode=disable)")
            }
        }
        guard Self.isValidSchemaName(schema) else {
            throw Error(reason: "schema '\(schema)' must be a letter or underscore then letters, digits or underscores (at most 63)")
        }
        self.schema = schema.lowercased()
        channel = Self.channelPrefix + self.schema
        guard channel.utf8.count <= Self.maxIdentifierBytes else {
            let most = Self.maxIdentifierBytes - Self.channelPrefix.utf8.count
            throw Error(
                reason: "schema '\(schema)' is too long: at most \(most) characters, so that the NOTIFY channel hookbot_<schema> fits in 63"
            )
        }
    }

    /// `^[A-Za-z_][A-Za-z0-9_]{0,62}$`
    static func isValidSchemaName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.unicodeScalars.count <= maxIdentifierBytes else { return false }
        func letter(_ c: Unicode.Scalar) -> Bool { ("a"..."z").contains(c) || ("A"..."Z").contains(c) || c == "_" }
        return letter(first) && name.unicodeScalars.allSatisfy { letter($0) || ("0"..."9").contains($0) }
    }

    /// The schema as a quoted identifier, for SQL text (it only holds [a-z0-9_], so quoting needs no escape).
    var quotedSchema: String { "\"\(schema)\"" }

    /// Startup parameters: unqualified table names resolve in the schema.
    var startupParameters: [(String, String)] {
        [("search_path", quotedSchema), ("application_name", "hookbot")]
    }

    /// The connection pool's configuration (no TLS).
    func clientConfiguration() -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: .disable)
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }

    /// A single connection's configuration (no TLS), with the same server, credentials and search path.
    func connectionConfiguration() -> PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: .disable)
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }
}
