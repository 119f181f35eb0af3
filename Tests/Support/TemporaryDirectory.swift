import Foundation
import XCTest

extension XCTestCase {
    /// A new empty directory `<prefix>-<UUID>` in the system's temporary directory, removed with what it holds
    /// when the test ends.
    public func makeTemporaryDirectory(_ prefix: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory
    }
}
