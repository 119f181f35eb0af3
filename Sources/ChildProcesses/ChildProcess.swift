import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A child process of the tests (`hookbot server`, `hookbot chat`, chromedriver, nginx, openssl, psql…) or of `hookbot
/// bench` (`hookbot server`, a remote bot), started with `posix_spawn`; what it writes to its standard output and error
/// can be captured, together, as a shell's `2>&1`.
///
/// Not Foundation's `Process`: on Linux its `run()` finds the descriptors to close in the child by reading
/// /proc/self/fd, and over-reads its entries (swift-corelibs-foundation #5472, fixed after Swift 6.3.1): the test
/// process crashed there with signal 11, more often the more descriptors it had open (the benchmark holds thousands
/// of sockets in some workloads). Nor swift-subprocess, which spawns safely, because its `run` keeps a process for the
/// length of a closure and is async only: the tests and the benchmark keep servers running across awaits and kill them
/// later, and some wait for a tool synchronously (`runProcess`).
/// glibc's `posix_spawn` runs no code of ours between fork and exec; the child's descriptors from 3 up are closed
/// with `posix_spawn_file_actions_addclosefrom_np`, which glibc does with `close_range` (no directory reads).
///
/// Two threads of its own per child: one waits for the exit (and reaps it), one reads the output until it ends.
/// A child still running when this is freed is killed (SIGKILL), so none outlives its test.
public final class ChildProcess: Sendable {
    /// Where one of the child's output streams goes.
    public enum Stream: Sendable {
        /// Into `printed` (standard output and error together when both are captured).
        case captured
        case discarded
        /// This process's own (a benchmark's child logging its errors to the same terminal).
        case inherited
    }

    /// How the child ended.
    public enum Termination: Sendable, Equatable, CustomStringConvertible {
        case exited(Int32)
        case signalled(Int32)

        /// The exit code, or 128 + the signal's number as a shell reports a signal.
        public var status: Int32 {
            switch self {
            case .exited(let code): code
            case .signalled(let signal): 128 + signal
            }
        }

        public var description: String {
            switch self {
            case .exited(let code): "exited with \(code)"
            case .signalled(let signal): "killed by signal \(signal)"
            }
        }
    }

    public let processIdentifier: pid_t
    private let state: ChildState
    /// The write end of the child's standard input, when it has one (`input: true`); -1 once closed.
    private let input: Int32

    /// Starts `executable` (a path, not looked up in PATH) with `arguments`, in `directory` (or this process's
    /// working directory), with this process's environment plus `environment`. The standard input is a pipe
    /// (`write`) with `input`, else /dev/null.
    public init(
        _ executable: URL, _ arguments: [String] = [], in directory: URL? = nil, environment: [String: String] = [:],
        input: Bool = false, output: Stream = .captured, error: Stream = .captured
    ) throws {
        #if canImport(Darwin)
            var actions: posix_spawn_file_actions_t? = nil
            var attributes: posix_spawnattr_t? = nil
        #else
            var actions = posix_spawn_file_actions_t()
            var attributes = posix_spawnattr_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts with default signal handlers and nothing blocked, whatever this process changed (NIO
        // ignores SIGPIPE, for one).
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        #if canImport(Darwin)
            // Darwin closes every descriptor not duplicated onto 0-2 with this flag (no closefrom action there).
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_CLOEXEC_DEFAULT))
        #else
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        #endif

        // The parent's ends are close-on-exec; the child's are duplicated onto 0, 1 and 2 (which clears the flag).
        var opened: [Int32] = []
        defer { for fd in opened { close(fd) } }
        func makePipe() throws -> (read: Int32, write: Int32) {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            // (Set after the pipe is made: a child spawned meanwhile by another thread through this type gets none of
            // them anyway, everything from 3 up is closed in it.)
            for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return (ends[0], ends[1])
        }
        var inputEnd: Int32 = -1
        if input {
            let ends = try makePipe()
            opened.append(ends.read)
            inputEnd = ends.write
            posix_spawn_file_actions_adddup2(&actions, ends.read, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        var outputEnd: Int32 = -1
        var childOutput: Int32 = -1
        if output == .captured || error == .captured {
            let ends = try makePipe()
            opened.append(ends.write)
            (outputEnd, childOutput) = ends
        }
        for (stream, fd) in [(output, Int32(1)), (error, Int32(2))] {
            switch stream {
            case .captured: posix_spawn_file_actions_adddup2(&actions, childOutput, fd)
            case .discarded: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0)
            case .inherited: break // 0-2 are the only descriptors the child inherits
            }
        }
        #if !canImport(Darwin)
            _ = SpawnExtensions.closeFrom?(&actions, 3)
        #endif
        if let directory {
            guard let addChdir = SpawnExtensions.changeDirectory else { throw POSIXError(.ENOSYS) }
            _ = addChdir(&actions, directory.path)
        }

        var variables = ProcessInfo.processInfo.environment
        variables.merge(environment) { _, new in new }
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable.path, &actions, &attributes, argv, envp)
        guard spawned == 0 else {
            if inputEnd >= 0 { close(inputEnd) }
            if outputEnd >= 0 { close(outputEnd) }
            throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO, userInfo: [NSFilePathErrorKey: executable.path])
        }
        processIdentifier = pid
        self.input = inputEnd
        state = ChildState(pid: pid, capturing: outputEnd >= 0)
        state.start(reading: outputEnd)
    }

    deinit {
        state.signal(SIGKILL)
        if input >= 0 { close(input) }
    }

    /// What the child printed so far (on the captured streams).
    public var printed: String { state.printed }

    /// Whether it has not exited yet.
    public var isRunning: Bool { state.termination == nil }

    /// How it ended, or nil while it runs.
    public var termination: Termination? { state.termination }

    /// Writes `text` to its standard input (started with `input: true`).
    public func write(_ text: String) {
        precondition(input >= 0, "the child was started without input: true")
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { writeBytes(input, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return // it closed its input (or ended): what it did not read is lost, as with a shell's pipe
            }
            bytes = bytes.dropFirst(written)
        }
    }

    /// Sends it `signal` (SIGTERM by default), unless it has exited.
    public func signal(_ signal: Int32 = SIGTERM) { state.signal(signal) }

    /// Blocks the calling thread until it has exited and its captured output has ended. For synchronous callers
    /// and children about to end (a tool, or after SIGKILL); an `async` caller that may wait long uses `waitForExit`.
    @discardableResult
    public func waitUntilExit() -> Termination { state.waitUntilDone() }

    /// Waits until it has exited and its captured output has ended; throws `Timeout` (with what it printed) when it
    /// has not within `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(10)) async throws -> Termination {
        let deadline = ContinuousClock.now + timeout
        while !state.isDone {
            guard ContinuousClock.now < deadline else { throw Timeout(waitingFor: "the process to exit; it printed:\n\(printed)") }
            try await Task.sleep(for: .milliseconds(10))
        }
        return state.waitUntilDone()
    }
}

/// A wait that ended without what it waited for (the tests' `waitUntil` throws it too).
public struct Timeout: Error, CustomStringConvertible {
    public init(waitingFor: String) { self.waitingFor = waitingFor }

    public var waitingFor: String
    public var description: String { "timed out waiting for \(waitingFor)" }
}

/// `ChildProcess`'s state, shared with its two threads (which do not hold the `ChildProcess`, so that it can be
/// freed, and kill its child, while they wait); every field is read and written under `condition`.
private final class ChildState: @unchecked Sendable {
    private let pid: pid_t
    private let condition = NSCondition()
    private var exit: ChildProcess.Termination?
    /// Reaped: its pid may belong to another process now, so it is never signalled again.
    private var reaped = false
    private var output: [UInt8] = []
    private var outputEnded: Bool

    init(pid: pid_t, capturing: Bool) {
        self.pid = pid
        outputEnded = !capturing
    }

    func start(reading fd: Int32) {
        Thread.detachNewThread { [self] in waitForExit() }
        if fd >= 0 { Thread.detachNewThread { [self] in read(fd) } }
    }

    private func locked<T>(_ body: () -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body()
    }

    var termination: ChildProcess.Termination? { locked { exit } }
    var printed: String { locked { String(decoding: output, as: UTF8.self) } }
    var isDone: Bool { locked { exit != nil && outputEnded } }

    func signal(_ signal: Int32) {
        locked {
            if !reaped { _ = kill(pid, signal) }
        }
    }

    func waitUntilDone() -> ChildProcess.Termination {
        condition.lock()
        defer { condition.unlock() }
        while exit == nil || !outputEnded { condition.wait() }
        return exit!
    }

    /// Waits for the exit without reaping (`WNOWAIT`), then reaps under the lock: `signal` never reaches a pid
    /// that was reaped and reused.
    private func waitForExit() {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
        condition.lock()
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        reaped = true
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (they are macros).
        exit = status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signalled(status & 0x7f)
        condition.broadcast()
        condition.unlock()
    }

    private func read(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { readBytes(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            locked { output.append(contentsOf: buffer[..<count]) }
        }
        close(fd)
        condition.lock()
        outputEnded = true
        condition.broadcast()
        condition.unlock()
    }
}

/// The C library's `write` and `read` (the names are taken inside the types above).
private func writeBytes(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int { write(fd, bytes, count) }
private func readBytes(_ fd: Int32, _ bytes: UnsafeMutableRawPointer?, _ count: Int) -> Int { read(fd, bytes, count) }

/// The C library's `posix_spawn` file actions that Swift's Glibc module does not import (GNU extensions: it is not built
/// with `_GNU_SOURCE`), looked up once by name: closing every descriptor from a number up (glibc 2.34, with
/// `close_range`; without it the parent's descriptors are still close-on-exec, only those other code left inheritable
/// would reach the child) and changing the child's working directory (glibc 2.29, macOS 10.15).
private enum SpawnExtensions {
    #if canImport(Darwin)
        typealias Actions = posix_spawn_file_actions_t?
    #else
        typealias Actions = posix_spawn_file_actions_t
    #endif
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<Actions>, Int32) -> Int32
    typealias AddChdir = @convention(c) (UnsafeMutablePointer<Actions>, UnsafePointer<CChar>) -> Int32

    static let closeFrom: AddCloseFrom? = symbol("posix_spawn_file_actions_addclosefrom_np")
    static let changeDirectory: AddChdir? = symbol("posix_spawn_file_actions_addchdir_np")

    private static func symbol<T>(_ name: String) -> T? {
        guard let program = dlopen(nil, RTLD_NOW), let address = dlsym(program, name) else { return nil }
        return unsafeBitCast(address, to: T.self)
    }
}
