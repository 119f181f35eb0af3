import Foundation
import IMClient
import IMServer
import Logging
import XCTest

extension XCTestCase {
    /// Starts a test server (`ServerHarness.start`) that stops when the test ends: its teardown is awaited, so the
    /// next test never finds this one's server still running.
    public func startServer(
        directory: URL? = nil, port: Int = 0, logger: Logger? = nil, configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> ServerHarness {
        let server = try await ServerHarness.start(directory: directory, port: port, logger: logger, configure: configure)
        addTeardownBlock(releasing: server) { await $0.stop() }
        return server
    }

    /// A client of `server` for `clientID`, opened; it closes when the test ends, before the server stops.
    public func openedClient(of server: ServerHarness, _ clientID: String) async throws -> IMClient {
        let client = server.client(clientID)
        addTeardownBlock(releasing: client) { await $0.close() }
        try await client.open()
        return client
    }

    /// Opens a client of `server` for each of `clientIDs`, one after the other, each with an `EventLog` that
    /// records from before it opens (as `openClients(_:)`); the clients close when the test ends, before the
    /// server stops. `let ((tom, jerry), logs) = try await openedClients(of: server, "Tom", "Jerry")`. (The names
    /// are a pack of `StringProtocol` values because Swift cannot yet require a pack's elements to be `String`.)
    public func openedClients<each Name: StringProtocol>(
        of server: ServerHarness, _ clientIDs: repeat each Name
    ) async throws -> (clients: (repeat ClientOf<each Name>), logs: [EventLog]) {
        var made: [IMClient] = []
        for clientID in repeat each clientIDs {
            let client = server.client(String(clientID))
            addTeardownBlock(releasing: client) { await $0.close() }
            made.append(client)
        }
        let logs = try await HookbotTestSupport.openClients(made)
        var taken = 0
        func take(_: some StringProtocol) -> IMClient {
            defer { taken += 1 }
            return made[taken]
        }
        return ((repeat take(each clientIDs)), logs)
    }
}

/// The client `openedClients(of:_:)` gives for each name of its pack.
public typealias ClientOf<Name> = IMClient
