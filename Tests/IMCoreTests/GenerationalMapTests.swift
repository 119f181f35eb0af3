import IMCore
import XCTest

/// `GenerationalMap`: the SDK's received message ids and the server writer's recently stored messages.
final class GenerationalMapTests: XCTestCase {
    func testTheOlderGenerationIsForgottenWhenTheNewerFills() {
        var ids = GenerationalMap<String, Void>(generation: 2)
        XCTAssertTrue(ids.insert("a"))
        XCTAssertFalse(ids.insert("a"))
        XCTAssertTrue(ids.insert("b"))
        XCTAssertTrue(ids.insert("c"))
        // Up to twice the generation is remembered: "a" still is, two ids later.
        XCTAssertFalse(ids.insert("a"))
        XCTAssertTrue(ids.insert("d"))
        // Three later ids and "a" is forgotten; the last two never are.
        XCTAssertTrue(ids.insert("a"))
        XCTAssertFalse(ids.insert("d"))
        XCTAssertFalse(ids.insert("a"))
        XCTAssertLessThan(ids.count, 4)
    }

    /// Whatever the order, a key among the last `generation` distinct ones is always found, and one with twice
    /// the generation of others inserted after it never is (the memory is bounded).
    func testTheLastGenerationIsAlwaysRemembered() {
        let generation = 50
        var ids = GenerationalMap<String, Void>(generation: generation)
        var generator = SystemRandomNumberGenerator()
        var inserted: [String] = [] // distinct ids, oldest first
        for _ in 0..<5_000 {
            let id = "m\(Int.random(in: 0..<400, using: &generator))"
            let recent = inserted.suffix(generation).contains(id)
            let isNew = ids.insert(id)
            if recent { XCTAssertFalse(isNew, "\(id) is among the last \(generation)") }
            if let at = inserted.lastIndex(of: id), inserted.count - at > 2 * generation {
                XCTAssertTrue(isNew, "\(id) came \(inserted.count - at) ids ago")
            }
            if isNew { inserted.append(id) }
            XCTAssertLessThan(ids.count, 2 * generation)
        }
    }

    /// A remembered key keeps its first value (an insert of a key already there changes nothing), and values
    /// are found in either generation.
    func testValuesStayWithTheirKeysInBothGenerations() {
        var messages = GenerationalMap<String, (cid: String, t: Int64)>(generation: 3)
        XCTAssertTrue(messages.insert(("工作群", 1), for: "m1"))
        XCTAssertFalse(messages.insert(("家 🏠", 9), for: "m1"))
        for k in 2...4 { messages.insert(("家 🏠", Int64(k)), for: "m\(k)") }
        XCTAssertEqual(messages["m1"]?.cid, "工作群")
        XCTAssertEqual(messages["m1"]?.t, 1)
        XCTAssertEqual(messages["m4"]?.t, 4)
        XCTAssertNil(messages["m0"])
        XCTAssertEqual(messages.count, 4)
    }
}
