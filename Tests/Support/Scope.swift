import IMClient

/// Runs `body`, then `cleanup`, also when `body` throws, and returns what `body` returned or rethrows its error.
/// The awaited teardown of Swift Testing's tests, which have no `addTeardownBlock` (and `defer` cannot await).
public func finally<T>(_ body: () async throws -> T, then cleanup: () async -> Void) async throws -> T {
    let result: T
    do {
        result = try await body()
    } catch {
        await cleanup()
        throw error
    }
    await cleanup()
    return result
}

extension ServerHarness {
    /// Runs `body` with this server and stops the server afterwards, also when `body` throws:
    /// `try await ServerHarness.start().whileRunning { server in … }`.
    public func whileRunning<T>(_ body: (ServerHarness) async throws -> T) async throws -> T {
        try await finally({ try await body(self) }, then: { await stop() })
    }
}

extension PushTestGateway {
    /// Runs `body` with this gateway and shuts it down afterwards, also when `body` throws.
    public func whileRunning<T>(_ body: (PushTestGateway) async throws -> T) async throws -> T {
        try await finally({ try await body(self) }, then: { await shutdown() })
    }
}

extension IMClient {
    /// Opens this client, runs `body` with it and closes it afterwards, also when `body` throws.
    nonisolated public func whileOpen<T>(_ body: (IMClient) async throws -> T) async throws -> T {
        try await open()
        return try await finally({ try await body(self) }, then: { await close() })
    }
}
