import XCTest

@testable import IMCore

/// `Command` keeps its fields in one copy-on-write storage (Command+Storage.swift): copies share it, a change
/// to a shared command copies it first, a change to an unshared one happens in place, and commands compare by
/// their fields.
final class CommandStorageTests: XCTestCase {
    private func message() -> Command {
        var direct = Command(cmd: .direct, op: nil, i: 3)
        direct.cid = "c1"
        direct.msg = TypedMessage.text("hi").encoded()
        direct.m = ["a", "b"]
        direct.ext = ["n": 1]
        direct.logs = [LogItem(msgId: "m1", from: "a", data: "x", timestamp: 1)]
        return direct
    }

    func testACopySharesTheFieldsUntilOneOfThemChanges() {
        let original = message()
        var copy = original
        XCTAssertTrue(copy.storage === original.storage, "a copy is one reference, not a copy of each field")

        copy.cid = "c2"
        copy.m?.append("c")
        copy.ext?["n"] = 2
        copy.logs?[0].recalled = true
        XCTAssertFalse(copy.storage === original.storage)
        XCTAssertEqual(original.cid, "c1")
        XCTAssertEqual(original.m, ["a", "b"])
        XCTAssertEqual(original.ext, ["n": 1])
        XCTAssertNil(original.logs?[0].recalled)
        XCTAssertEqual(copy.cid, "c2")
        XCTAssertEqual(copy.m, ["a", "b", "c"])
        XCTAssertEqual(copy.ext, ["n": 2])
        XCTAssertEqual(copy.logs?[0].recalled, true)
        XCTAssertEqual(copy.msg, original.msg, "the fields not changed are the original's")
        XCTAssertEqual(copy.i, 3)
    }

    func testAChangeToACommandNobodySharesIsMadeInPlace() {
        var command = message()
        // Weak, so that the test's reference does not make the storage shared; it turns nil if the storage is
        // replaced (and freed) instead of changed.
        weak var storage = command.storage
        command.m?.append("c")
        command.cid = nil
        command.op = .added
        XCTAssertNotNil(storage)
        XCTAssertTrue(command.storage === storage)
        XCTAssertEqual(command.m, ["a", "b", "c"])
        XCTAssertNil(command.cid)
        XCTAssertEqual(command.op, .added)

        // Once the copy that shared it is gone, the storage is the command's alone again.
        var shared: Command? = command
        command.i = 4
        XCTAssertFalse(command.storage === storage)
        weak var copied = command.storage
        XCTAssertEqual(shared?.i, 3)
        shared = nil
        XCTAssertNil(storage, "the shared storage went with its last command")
        command.i = 5
        XCTAssertNotNil(copied)
        XCTAssertTrue(command.storage === copied)
        XCTAssertEqual(command.i, 5)
    }

    func testAMirrorShowsTheFields() {
        let labels = Mirror(reflecting: message()).children.map(\.label)
        XCTAssertEqual(labels.count, 94)
        XCTAssertEqual(Array(labels.prefix(3)), ["cmd", "op", "i"])
        XCTAssertTrue(String(describing: message()).hasPrefix("Command(cmd: IMCore.CommandType.direct, op: nil, i: Optional(3)"))
    }

    func testAKeyPathWritesOnlyItsOwnCopy() {
        let original = message()
        var copy = original
        let cid: WritableKeyPath<Command, String?> = \.cid
        copy[keyPath: cid] = "c3"
        XCTAssertEqual(copy.cid, "c3")
        XCTAssertEqual(original.cid, "c1")
    }

    func testCommandsAreEqualWhenTheirFieldsAre() {
        let one = message()
        let other = message()
        XCTAssertFalse(one.storage === other.storage)
        XCTAssertEqual(one, other)

        var changed = one
        changed.m = ["a"]
        XCTAssertNotEqual(changed, one)
        changed.m = ["a", "b"]
        XCTAssertEqual(changed, one)
        XCTAssertFalse(changed.storage === one.storage)

        XCTAssertNotEqual(Command(cmd: .direct), Command(cmd: .ack))
        XCTAssertEqual(Command(cmd: .conv, op: .start), Command(cmd: .conv, op: .start, i: nil))
    }

    func testCopiesSentToOtherTasksChangeOnlyThemselves() async {
        let original = message()
        let results = await withTaskGroup(of: (Int, Command).self) { group in
            for index in 0..<8 {
                group.addTask {
                    var mine = original
                    for step in 0..<100 {
                        mine.i = index
                        mine.m?.append("\(index)-\(step)")
                    }
                    return (index, mine)
                }
            }
            var results: [Int: Command] = [:]
            for await (index, command) in group { results[index] = command }
            return results
        }
        XCTAssertEqual(original, message())
        for (index, command) in results {
            XCTAssertEqual(command.i, index)
            XCTAssertEqual(command.m?.count, 102)
            XCTAssertEqual(command.m?.last, "\(index)-99")
        }
    }
}
