import Foundation

/// The event-loop threads (a `MultiThreadedEventLoopGroup`'s `NIO-ELT-…`; NIO's shared loops, made once, are
/// `NIO-SGLTN-…`) and the open descriptors other than sockets (files, pipes, event loops' epoll and event
/// descriptors) of this process, from /proc. Sockets are left out: HTTP clients (URLSession) keep connections to
/// stopped servers in their caches for a while, and a stopped server's listening socket closes whether or not the
/// server is freed.
public struct ProcessResources: CustomStringConvertible, Sendable {
    public let eventLoopThreads: Int
    /// Each open descriptor's target (`readlink /proc/self/fd/N`), sockets left out.
    public let descriptors: [String: String]

    public init() {
        let files = FileManager.default
        let tasks = (try? files.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        eventLoopThreads =
            tasks.filter { task in
                let name = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)
                return name?.hasPrefix("NIO-ELT") == true
            }.count
        var descriptors: [String: String] = [:]
        for fd in (try? files.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            guard let target = try? files.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"), !target.hasPrefix("socket:")
            else { continue }
            descriptors[fd] = target
        }
        self.descriptors = descriptors
    }

    /// No more event-loop threads than `other`, and at most `slack` more descriptors.
    public func isAtMost(_ other: ProcessResources, slack: Int = 0) -> Bool {
        eventLoopThreads <= other.eventLoopThreads && descriptors.count <= other.descriptors.count + slack
    }

    /// The targets of the descriptors open now that were not open in `other`.
    public func newDescriptors(since other: ProcessResources) -> [String] {
        descriptors.filter { other.descriptors[$0.key] != $0.value }.map(\.value).sorted()
    }

    public var description: String { "\(eventLoopThreads) event-loop threads, \(descriptors.count) descriptors (sockets aside)" }
}

/// Checks that what `cycle` starts and stops is freed: runs it once (what the first run makes lazily, such as NIO's
/// shared event loops, is not a leak), then `times` more, and waits until each run's `alive` (what it made and is
/// still referenced, from weak references) is empty and the process has no more event-loop threads than before them
/// and at most two more open descriptors (the process's own lazily made ones, such as a dispatch timer's, may appear
/// at any time; a leaked server leaves at least five per run); throws `Timeout` saying what is left otherwise.
public func expectFreed(
    _ what: String, times: Int = 3, timeout: Duration = .seconds(10), _ cycle: () async throws -> @Sendable () -> [String]
) async throws {
    _ = try await cycle()
    let before = ProcessResources()
    var runs: [@Sendable () -> [String]] = []
    for _ in 0..<times { runs.append(try await cycle()) }
    try await waitUntil(
        "\(what) to be freed: \(runs.map { $0() }) still alive; before \(before), now \(ProcessResources()), new: "
            + "\(ProcessResources().newDescriptors(since: before))", timeout: timeout
    ) {
        runs.allSatisfy { $0().isEmpty } && ProcessResources().isAtMost(before, slack: 2)
    }
}

/// Named weak references (what a test started), for `expectFreed`: `alive` names those still referenced elsewhere.
public struct WeakReferences: @unchecked Sendable {
    private struct Entry {
        let name: String
        weak var object: AnyObject?
    }

    private let entries: [Entry]

    public init(_ objects: KeyValuePairs<String, AnyObject>) {
        entries = objects.map { Entry(name: $0.key, object: $0.value) }
    }

    /// The names of the objects still alive.
    public var alive: [String] { entries.filter { $0.object != nil }.map(\.name) }
}
