import HookbotTestSupport
import IMCore
import XCTest

/// Each operator of `conv query` against a seeded data set.
final class QueryTests: XCTestCase {
    private static let seed: [(name: String, members: [String], attr: JSONValue)] = [
        ("alpha", ["Jerry"], ["level": 1, "topic": "cats", "vip": true]),
        ("beta", ["Jerry", "Bob"], ["level": 2, "topic": "Dogs"]),
        ("gamma", ["Bob"], ["level": 3, "topic": "cats and dogs", "vip": false]),
        ("delta", ["Harry", "Bob"], ["level": 4]),
    ]

    private func seeded() async throws -> (ServerHarness, TestClient, [String: String]) {
        let server = try await ServerHarness.start()
        let tom = try await server.login("Tom")
        var ids: [String: String] = [:]
        for item in Self.seed {
            ids[item.name] = try await tom.startConversation(members: item.members, name: item.name, attr: item.attr)
        }
        return (server, tom, ids)
    }

    private func names(
        _ client: TestClient, _ condition: JSONValue, sort: String? = "name", limit: Int? = nil,
        skip: Int? = nil
    ) async throws -> [String] {
        var query = Command(cmd: .conv, op: .query)
        query.where = condition
        query.sort = sort
        query.limit = limit
        query.skip = skip
        let reply = try await client.request(query)
        guard let results = reply.results else { throw IMError(code: reply.code ?? 0, reason: reply.detail ?? "no results") }
        return results.compactMap(\.name)
    }

    func testLargeMemberListsAreAnsweredOrRefusedNeverAnInternalError() async throws {
        let (server, tom, _) = try await seeded()
        addTeardownBlock(releasing: server) { await $0.stop() }
        let many: [JSONValue] = (0..<998).map { .string("user\($0)") }
        let awaited1 = try await names(tom, ["m": ["$all": .array(many)]])
        XCTAssertEqual(awaited1, [])
        let awaited2 = try await names(tom, ["m": ["$all": .array(["Jerry", "Bob", "Bob"] + many.prefix(997))]])
        XCTAssertEqual(awaited2, [])
        let awaited3 = try await names(tom, ["m": ["$all": ["Jerry", "Bob", "Jerry"]]])
        XCTAssertEqual(awaited3, ["beta"])
        for op in ["$all", "$in", "$nin"] {
            var query = Command(cmd: .conv, op: .query)
            query.where = ["m": .object([op: .array((0..<1001).map { .string("user\($0)") })])]
            let reply = try await tom.request(query)
            XCTAssertEqual(reply.code, 4903, op)
        }
    }

    func testRegularExpressionsThatCouldRunForeverAreRefused() async throws {
        let (server, tom, _) = try await seeded()
        addTeardownBlock(releasing: server) { await $0.stop() }
        for pattern in ["(a|aa)*c", "(a+)+b", "(x*)*", "(a)\\1", ".*.*.*b", "((ab)+c)*"] {
            var query = Command(cmd: .conv, op: .query)
            query.where = ["attr.topic": ["$regex": .string(pattern)]]
            let reply = try await tom.request(query)
            XCTAssertEqual(reply.code, 4903, pattern)
        }
        for pattern in ["^cats", "a.*s", "(ca)*ts", "(?:ca)+ts", "[a-z]+ and", "c(at|ow)s"] {
            let found = try await names(tom, ["attr.topic": ["$regex": .string(pattern)]])
            XCTAssertFalse(found.isEmpty, pattern)
        }
        // Values longer than 1 KiB are not searched.
        let long = String(repeating: "cats ", count: 300)
        _ = try await tom.startConversation(members: ["Jerry"], name: "long", attr: ["topic": .string(long)])
        let longFound = try await names(tom, ["attr.topic": ["$regex": "^cats cats"]])
        XCTAssertFalse(longFound.contains("long"))
    }

    func testOperators() async throws {
        let (server, tom, ids) = try await seeded()
        addTeardownBlock(releasing: server) { await $0.stop() }
        let cases: [(JSONValue, [String])] = [
            (["name": "beta"], ["beta"]),
            (["attr.level": ["$ne": 2]], ["alpha", "delta", "gamma"]),
            (["attr.level": ["$gt": 2]], ["delta", "gamma"]),
            (["attr.level": ["$gte": 2, "$lt": 4]], ["beta", "gamma"]),
            (["attr.level": ["$lte": 1]], ["alpha"]),
            (["attr.topic": ["$regex": "^cats"]], ["alpha", "gamma"]),
            (["attr.topic": ["$regex": "dogs", "$options": "i"]], ["beta", "gamma"]),
            (["name": ["$in": ["alpha", "delta", "omega"]]], ["alpha", "delta"]),
            (["name": ["$nin": ["alpha", "delta"]]], ["beta", "gamma"]),
            (["m": "Bob"], ["beta", "delta", "gamma"]),
            (["m": ["$all": ["Jerry", "Bob"]]], ["beta"]),
            (["m": ["$in": ["Harry", "Jerry"]]], ["alpha", "beta", "delta"]),
            (["attr.vip": ["$exists": true]], ["alpha", "gamma"]),
            (["attr.vip": ["$exists": false]], ["beta", "delta"]),
            (["attr.vip": true], ["alpha"]),
            (["$or": [["name": "alpha"], ["attr.level": 4]]], ["alpha", "delta"]),
            (["$and": [["m": "Bob"], ["attr.level": ["$lt": 3]]]], ["beta"]),
            (["c": "Tom", "tr": false], ["alpha", "beta", "delta", "gamma"]),
            (["objectId": .string(ids["gamma"] ?? "")], ["gamma"]),
            (["lm": ["$exists": false]], ["alpha", "beta", "delta", "gamma"]),
        ]
        for (condition, expected) in cases {
            let found = try await names(tom, condition)
            XCTAssertEqual(found, expected, "where \(condition.jsonString())")
        }
    }

    func testSortLimitSkipAndLastMessageOrder() async throws {
        let (server, tom, ids) = try await seeded()
        addTeardownBlock(releasing: server) { await $0.stop() }
        let observed1 = try await names(tom, .object([:]), sort: "-name")
        XCTAssertEqual(observed1, ["gamma", "delta", "beta", "alpha"])
        let observed2 = try await names(tom, .object([:]), sort: "attr.level", limit: 2, skip: 1)
        XCTAssertEqual(observed2, ["beta", "gamma"])
        try await tom.sendText("first", to: try required(ids["beta"]))
        try await tom.sendText("second", to: try required(ids["alpha"]))
        let observed3 = try await names(tom, ["lm": ["$gt": 0]], sort: "-lm")
        XCTAssertEqual(observed3, ["alpha", "beta"])
        let observed4 = try await names(tom, .object([:]), sort: nil, limit: 1)
        XCTAssertEqual(observed4, ["alpha"], "default order is most recent message first")
    }

    func testInvalidQueriesGetClearErrors() async throws {
        let (server, tom, _) = try await seeded()
        addTeardownBlock(releasing: server) { await $0.stop() }
        let bad: [(JSONValue, String)] = [
            (["color": "red"], "unknown field 'color'"),
            (["attr.x') OR 1=1 --": 1], "invalid attribute path"),
            (["name": ["$where": "1"]], "unsupported operator '$where'"),
            (["name": ["$regex": "("]], "not a valid regular expression"),
            (["name": ["$regex": "a", "$options": "q"]], "unknown option"),
            (["$or": "nope"], "must be a non-empty array"),
            (["m": ["$all": []]], "must be a non-empty array"),
            ("just a string", "must be a JSON object"),
            (["name": ["$gt": ["a": 1]]], "objects are not comparable"),
        ]
        for (condition, detail) in bad {
            var query = Command(cmd: .conv, op: .query)
            query.where = condition
            let reply = try await tom.request(query)
            XCTAssertEqual(reply.cmd, .error, condition.jsonString())
            XCTAssertEqual(reply.code, 4903, condition.jsonString())
            XCTAssertTrue(reply.detail?.contains(detail) == true, "\(reply.detail ?? "nil") should mention \(detail)")
        }
        var query = Command(cmd: .conv, op: .query)
        query.sort = "-nope"
        let observed1 = try await tom.request(query).code
        XCTAssertEqual(observed1, 4903)
        let observed5 = try await names(tom, ["name": "alpha"])
        XCTAssertEqual(observed5, ["alpha"], "the connection stays usable")
    }

    func testUnindexedQueriesAreBoundedByTheScanLimit() async throws {
        let server = try await startServer { $0.queryScanLimit = 3 }
        let tom = try await server.login("Tom")
        for k in 0..<5 { _ = try await tom.startConversation(members: ["m\(k)"], name: "c\(k)") }
        var query = Command(cmd: .conv, op: .query)
        query.where = ["name": "c1"]
        let refused = try await tom.request(query)
        XCTAssertEqual(refused.code, 4310)
        query.where = ["m": "m1", "name": "c1"]
        let indexedResults = try await tom.request(query).results?.compactMap(\.name)
        XCTAssertEqual(indexedResults, ["c1"])
    }
}
