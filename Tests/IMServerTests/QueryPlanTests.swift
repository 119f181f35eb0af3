import Foundation
import GRDB
import IMCore
import XCTest

@testable import IMServer

/// Conditions on members start from the members index: a query never visits every conversation to find a
/// member's few.
final class QueryPlanTests: XCTestCase {
    func testMemberConditionsDriveTheQueryFromTheMembersIndex() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("plan-\(UUID().uuidString).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try SQLiteSchema.open(path: path, synchronousFull: false)
        let conditions: [JSONValue] = [
            ["m": "Tom"], ["m": ["$in": ["Tom", "Jerry"]]], ["m": ["$all": ["Tom", "Jerry"]]],
            ["m": "Tom", "attr.topic": ["$regex": "^cats"]], ["m": "Tom", "name": "x"],
        ]
        for condition in conditions {
            let query = try ConversationQuery.compile(condition)
            let order = try ConversationQuery.orderBy(nil)
            let plan = try db.read { db in
                try Row.fetchAll(
                    db, sql: "EXPLAIN QUERY PLAN " + query.select(orderBy: order),
                    arguments: SQLiteStore.arguments(query.values) + ["viewer", 10, 0]
                ).map { $0["detail"] as String }
            }
            let text = plan.joined(separator: " | ")
            XCTAssertTrue(text.contains("members_by_client"), "\(condition): \(text)")
            XCTAssertFalse(plan.contains { $0.hasPrefix("SCAN c") }, "\(condition) visits every conversation: \(text)")
        }
    }
}
