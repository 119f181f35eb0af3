import Foundation
import IMCore
import XCTest

@testable import HookRuntime

/// A plugin's settings are checked against its schema (declared, or the types of its `config` defaults).
final class ConfigSchemaTests: XCTestCase {
    private func loadError(_ source: String, config: [String: JSONValue]) -> HookError? {
        let fixture = Fixture()
        fixture.write("p.lua", source)
        return fixture.runtime(config: config).loadAll().errors.first
    }

    private static let inferred = """
        return { name = "p",
          config = { greeting = "hi", limit = 3, enabled = true, words = {}, module = false, flood = { n = 1 } },
          on_receive = function(msg, ctx) ctx.reply(ctx.config.greeting) end }
        """

    func testInferredFromTheDefaults() {
        XCTAssertNil(
            loadError(
                Self.inferred,
                config: [
                    "p": [
                        "greeting": "hello", "limit": 4.5, "words": ["a"],
                        "module": "faq", "flood": false,
                    ]
                ]))
        XCTAssertNil(
            loadError(Self.inferred, config: ["p": ["words": ["x": 1], "enabled": false, "limit": false]]),
            "an empty default takes a list or a table; false turns a setting off")
        let unknown = loadError(Self.inferred, config: ["p": ["greting": "hello"]])
        XCTAssertEqual(
            unknown?.reason,
            .config(
                key: "plugins.p.greting",
                message: "unknown setting (known: enabled, flood, greeting, limit, module, words)"))
        XCTAssertEqual(
            loadError(Self.inferred, config: ["p": ["limit": "3"]])?.message,
            "plugins.p.limit: must be a number (or false), not a string")
        XCTAssertEqual(
            loadError(Self.inferred, config: ["p": ["enabled": "yes"]])?.message,
            "plugins.p.enabled: must be true or false, not a string")
        XCTAssertEqual(
            loadError(Self.inferred, config: ["p": ["flood": ["a", "b"]]])?.message,
            "plugins.p.flood: must be a table (or false), not a list")
        XCTAssertEqual(
            loadError("return { name = \"p\" }", config: ["p": ["x": 1]])?.message,
            "plugins.p.x: unknown setting (this plugin takes none)")
    }

    private static let declared = """
        return { name = "p",
          schema = {
            mode = { type = "string", default = "warn", values = { "warn", "mute", "kick" }, description = "what a strike does" },
            limit = { type = "integer", default = 3 },
            ratio = { type = { "number", "boolean" } },
            url = { type = "string", required = true },
          },
          config = { limit = 5 },
          on_load = function(ctx) ctx.state.set("seen", { mode = ctx.config.mode, limit = ctx.config.limit, url = ctx.config.url }) end }
        """

    func testDeclaredSchemaWithDefaultsValuesAndRequiredKeys() throws {
        let fixture = Fixture()
        fixture.write("p.lua", Self.declared)
        let report = fixture.runtime(config: ["p": ["url": "https://example.org"]]).loadAll()
        XCTAssertEqual(report.errors, [])
        let seen = try fixture.store.get(plugin: "p", key: "seen", now: 0)
        XCTAssertEqual(seen, ["mode": "warn", "limit": 5, "url": "https://example.org"], "config defaults win over schema defaults")

        XCTAssertEqual(loadError(Self.declared, config: ["p": [:]])?.message, "plugins.p.url: is required")
        XCTAssertEqual(
            loadError(Self.declared, config: ["p": ["url": "u", "mode": "ban"]])?.message,
            #"plugins.p.mode: must be one of "warn", "mute", "kick", not "ban""#)
        XCTAssertEqual(
            loadError(Self.declared, config: ["p": ["url": "u", "limit": 2.5]])?.message,
            "plugins.p.limit: must be an integer, not a number")
        XCTAssertNil(loadError(Self.declared, config: ["p": ["url": "u", "ratio": true]]))
        XCTAssertEqual(
            loadError(Self.declared, config: ["p": ["url": "u", "ratio": "high"]])?.message,
            "plugins.p.ratio: must be a number (or false), not a string")
    }

    func testMalformedSchemasAreLoadErrors() {
        let cases: [(String, String)] = [
            ("schema = { a = 1 }", "schema.a must be a table"),
            ("schema = { a = { type = \"text\" } }", "schema.a.type: unknown type 'text'"),
            ("schema = { a = { kind = \"string\" } }", "schema.a: unknown field 'kind'"),
            ("schema = { a = { type = \"integer\", default = \"x\" } }", "schema.a.default must be an integer, not a string"),
        ]
        for (schema, expected) in cases {
            let error = loadError("return { name = \"p\", \(schema) }", config: [:])
            XCTAssertEqual(error?.reason, .invalidPlugin(expected), schema)
        }
    }

    func testErrorsAreLocatedInTheHostsFile() {
        let fixture = Fixture()
        fixture.write("p.lua", Self.inferred)
        let engine = PluginEngine(
            directory: fixture.plugins, store: fixture.store, config: ["p": ["limt": 1]],
            configLocator: { path in path == "plugins.p.limt" ? ("hookbot.toml", 12) : nil })
        let error = engine.loadAll().errors.first
        XCTAssertEqual(error?.source, "hookbot.toml")
        XCTAssertEqual(error?.line, 12)
        XCTAssertEqual(error?.description.hasPrefix("plugin p load at hookbot.toml:12: plugins.p.limt: unknown setting"), true)
    }
}
