import Synchronization
import XCTest

extension XCTestCase {
    /// `addTeardownBlock` for a block that needs `value` (a server to stop, a client to close): `value` is held only
    /// until the block has run. XCTest on Linux keeps every test case and its teardown blocks until the process ends,
    /// so a block that captured a server itself kept it, with its threads and open files, for the rest of the run
    /// (a whole run reached ~4,800 descriptors).
    public func addTeardownBlock<Value: Sendable>(
        releasing value: Value, _ block: @escaping @Sendable (Value) async throws -> Void
    ) {
        let held = Mutex<Value?>(value)
        addTeardownBlock {
            guard let value = held.withLock({ $0.take() }) else { return }
            try await block(value)
        }
    }
}
