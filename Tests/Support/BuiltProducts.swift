import Foundation

/// An executable SwiftPM built beside the test bundle (`.build/<triple>/<config>/hookbot`, an example), or nil:
/// looked for next to the `.xctest` the tests run from (macOS runs it with `xctest`, Linux runs it itself) and
/// up to three folders above.
public func builtProduct(_ name: String) -> URL? {
    let testBinary = URL(fileURLWithPath: CommandLine.arguments.first(where: { $0.contains(".xctest") }) ?? CommandLine.arguments[0])
    var directory = testBinary.deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    return nil
}

/// `builtProduct("hookbot")`, or an error naming where it was looked for.
public func builtHookbot() throws -> URL {
    guard let binary = builtProduct("hookbot") else {
        let place = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("hookbot")
        throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: place.path])
    }
    return binary
}

/// Runs an executable to its end (in `directory` if given): its exit status (a signal shows as 128 + n) and
/// its standard output and error together. Blocks the calling thread while it runs.
public func runProcess(_ binary: URL, _ arguments: [String], in directory: URL? = nil) throws -> (status: Int32, output: String) {
    let process = try ChildProcess(binary, arguments, in: directory)
    let status = process.waitUntilExit().status
    return (status, process.printed)
}
