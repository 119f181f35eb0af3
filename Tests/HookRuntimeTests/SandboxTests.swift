import XCTest

@testable import HookRuntime

/// Each probe runs inside a hook; it must be refused (error or nil), never succeed.
final class SandboxTests: XCTestCase {
    private func assertRefused(_ body: String, file: StaticString = #filePath, line: UInt = #line) {
        let out = probe(body, file: file, line: line)
        XCTAssertTrue(out.hasPrefix("false|"), "escape not refused: \(body) -> \(out)", file: file, line: line)
    }

    func testDangerousGlobalsAreAbsent() {
        for global in [
            "os.execute", "os.getenv", "os.remove", "io", "loadfile", "dofile", "debug", "package", "string.dump",
            "('').dump", "_G.io",
        ] {
            XCTAssertEqual(probe("return \(global)"), "true|nil", global)
        }
        XCTAssertEqual(probe("return type(os.time())"), "true|number")
    }

    func testEscapeAttemptsAreRefused() {
        assertRefused("os.execute('touch /tmp/pwned')")
        assertRefused("io.open('/etc/passwd')")
        assertRefused("loadfile('/etc/passwd')")
        assertRefused("dofile('/etc/passwd')")
        assertRefused("debug.getregistry()")
        assertRefused("package.loadlib('libc.so.6', 'system')")
        assertRefused("require('os')")
        assertRefused("require('io')")
        assertRefused("require('../x')")
        assertRefused("require('lib/x')")
        assertRefused("require('/etc/passwd')")
        assertRefused("require('..')")
        assertRefused("collectgarbage('stop')")
        assertRefused("collectgarbage('generational')")
        assertRefused("string.dump(function() end)")
        assertRefused("getmetatable('').__index.upper = function() return 'pwned' end")
        assertRefused("setmetatable('', {})")
        assertRefused("load(io.read)")
    }

    func testStringMetatableIsSealed() {
        XCTAssertEqual(probe("return getmetatable('')"), "true|false")
        // modifying the visible string table does not change string methods
        XCTAssertEqual(probe("string.upper = function() return 'pwned' end return ('abc'):upper()"), "true|ABC")
    }

    func testLoadRejectsBinaryChunksAndUsesSandboxEnv() {
        // a binary chunk header (ESC "Lua")
        XCTAssertEqual(
            probe(#"local f, err = load("\27Lua\84\0\25\147\r\n\26\n") return f == nil and err:find("binary") ~= nil"#), "true|true")
        XCTAssertEqual(probe("return load('return io')()"), "true|nil")
        XCTAssertEqual(probe("return load('return 1 + 2')()"), "true|3")
        XCTAssertEqual(probe("return load('return os.execute', 'x', 'b')()"), "true|nil")
    }

    func testRequireFromLibFolder() {
        let (_, rt) = loaded([
            "lib/util/strings.lua": "local M = {} function M.shout(s) return s:upper() .. '!' end return M",
            "lib/counter.lua": "local n = 0 return { next = function() n = n + 1 return n end }",
            "user.lua": #"""
            local strings = require("util.strings")
            local c1 = require("counter")
            local c2 = require("counter")
            return { on_receive = function(msg, ctx)
              ctx.reply(strings.shout(msg.text) .. " " .. c1.next() .. " " .. c2.next() .. " " .. tostring(c1 == c2))
              local ok, err = pcall(require, "missing")
              ctx.log(tostring(ok) .. " " .. err)
            end }
            """#,
        ])
        let r = rt.receive(msg("hey"))
        XCTAssertEqual(sentTexts(r.actions), ["HEY! 1 2 true"])
        XCTAssertTrue(logMessages(r.actions).first?.contains("not found") ?? false)
    }

    func testPluginsDoNotShareGlobals() {
        let (_, rt) = loaded([
            "a.lua":
                #"shared = "from a" return { priority = 2, on_receive = function(msg, ctx) leaked = true ctx.reply(tostring(shared)) end }"#,
            "b.lua":
                #"return { priority = 1, on_receive = function(msg, ctx) ctx.reply(tostring(shared) .. " " .. tostring(leaked)) end }"#,
        ])
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["from a", "nil nil"])
    }
}
