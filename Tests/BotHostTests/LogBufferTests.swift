import BotHost
import HookRuntime
import Logging
import XCTest

/// The log ring's caps: each entry's message and metadata are cut (marked with what was dropped), the ring
/// keeps at most `maxBytes` of text by dropping its oldest entries, and readers still page by sequence.
final class LogBufferTests: XCTestCase {
    func testEntriesAreCutAndTheRingKeepsItsByteCap() {
        let logs = LogBuffer(capacity: 2000, maxBytes: 256 << 10)
        let huge = String(repeating: "é", count: 100_000) // 200,000 bytes, two per character
        for index in 1...500 {
            logs.append(level: .info, message: huge, metadata: ["plugin": "p", "error": huge, "n": "\(index)"])
        }
        XCTAssertLessThanOrEqual(logs.bytes, logs.maxBytes)
        let (entries, next) = logs.entries(limit: 1000)
        XCTAssertEqual(next, 500, "the newest entry's sequence number")
        XCTAssertEqual(entries.last?.metadata["n"], "500")
        XCTAssertLessThan(entries.count, 500, "the oldest entries went to keep the byte cap")
        XCTAssertGreaterThan(entries.count, 10)
        for entry in entries {
            XCTAssertLessThanOrEqual(entry.message.utf8.count, StoredText.maxLogEntryBytes)
            XCTAssertTrue(entry.message.hasPrefix("éé"))
            XCTAssertNotNil(entry.message.firstMatch(of: /é … \[\d+ bytes cut\]$/), String(entry.message.suffix(40)))
            XCTAssertLessThanOrEqual(entry.metadata["error"]?.utf8.count ?? 0, LogBuffer.maxMetadataValueBytes)
            XCTAssertEqual(entry.plugin, "p")
        }
        // Paging after a sequence number still works over the remaining entries.
        let (after, _) = logs.entries(after: 495, limit: 10)
        XCTAssertEqual(after.map(\.seq), [496, 497, 498, 499, 500])
    }

    func testCutKeepsWholeCharactersAndIsStable() {
        XCTAssertEqual(StoredText.cut("short", to: 10), "short")
        let text = String(repeating: "猪", count: 1000) // 3,000 bytes
        let cut = StoredText.cut(text, to: 100)
        XCTAssertLessThanOrEqual(cut.utf8.count, 100)
        XCTAssertTrue(cut.hasPrefix("猪猪"))
        let kept = cut.prefix { $0 == "猪" }.utf8.count
        XCTAssertEqual(cut, String(repeating: "猪", count: kept / 3) + " … [\(3000 - kept) bytes cut]")
        XCTAssertEqual(StoredText.cut(cut, to: 100), cut, "a cut text fits its limit")
    }
}
