import CLua
import Dispatch
import Foundation
import IMCore
import LuaSandbox
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - What plugins see of stored files

/// A file stored on the hub, as the server recorded it (`msg.file` of a stored file, `ctx.media.info`).
/// Every value is the server's: computed from the bytes, never the uploader's word.
public struct HookMediaRecord: Sendable, Hashable {
    /// The public id (a message's `_lcfile.objId`).
    public var id: String
    /// Where the file is served (a path such as `/media/<id>/<name>`, or an absolute URL).
    public var url: String?
    public var name: String?
    /// What the server computed from the bytes: size, SHA-256, sniffed MIME type, format, dimensions, duration.
    public var metadata: MediaMetadata

    public init(id: String, url: String? = nil, name: String? = nil, metadata: MediaMetadata) {
        self.id = id
        self.url = url
        self.name = name
        self.metadata = metadata
    }
}

/// Why a look at a stored file failed (what a plugin gets as the second value of `nil, reason`).
public struct HookMediaError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Where the plugins' looks at stored files go: the server's media store when the bot runs in the server's
/// process, the server's HTTP API for a bot on another machine, a scenario's files in `hookbot test`.
///
/// The runtime calls it from its Lua thread and waits for the answer at most until the hook's time is up
/// (see `HookMedia`), so an implementation needs no timeout of its own, but should stop when its task is
/// cancelled.
public protocol HookMediaSource: Sendable {
    /// The record of a stored file; nil when there is no stored file with that id.
    func record(id: String) async throws -> HookMediaRecord?
    /// The first `maxBytes` bytes of a stored file (all of it when shorter). Throws `HookMediaError` for a
    /// file that is not there.
    func read(id: String, maxBytes: Int) async throws -> [UInt8]
}

/// Limits of the plugins' looks at stored files.
public enum HookMedia {
    /// The most bytes `ctx.media.read` returns (1 MiB); a larger `max_bytes` is cut to it.
    public static let maxRead = 1 << 20
    /// The longest the host waits for a file's record before a hook that gets the message runs (100 ms,
    /// and never more than half the time left in an interception review's budget).
    public static let lookupWait = 0.1
    /// Records kept in memory (the records of stored files never change).
    public static let cacheSize = 4096

    /// Whether `id` can name a stored file: 1–64 characters of `[A-Za-z0-9_-]`.
    public static func isValidID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64
            && id.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F
            }
    }
}

/// The media source a runtime uses; settable after the runtime is made (`PluginRuntime.setMedia`).
final class MediaSourceBox: Sendable {
    let source = Mutex<(any HookMediaSource)?>(nil)
}

/// What the host found about a message's file when a hook got it: the record (a stored file), or why
/// there is none.
struct FileLookup: Hashable {
    var record: HookMediaRecord?
    var error: String?
}

/// The runtime's side of media: waits for the source within deadlines and caches records. Used on the
/// runtime's Lua thread only.
final class MediaAccess {
    let box = MediaSourceBox()
    private var cache: [String: HookMediaRecord] = [:]
    private var order: [String] = []
    private var head = 0
    /// Lookups that failed (timed out, store unreachable), kept for `failureMemory` seconds so that a store
    /// that does not answer costs one wait, not one per hook.
    private var failures: [String: (until: Double, error: HookMediaError)] = [:]
    static let failureMemory = 2.0

    /// Seconds on the monotonic clock (the clock the sandbox's deadlines use).
    static func monotonicNow() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
    }

    var hasSource: Bool { box.source.withLock { $0 != nil } }

    /// The record of `id`, waiting at most until `deadline` (monotonic seconds). `.success(nil)`: no such
    /// stored file.
    func record(_ id: String, deadline: Double) -> Result<HookMediaRecord?, HookMediaError> {
        if let hit = cache[id] { return .success(hit) }
        guard HookMedia.isValidID(id) else { return .success(nil) }
        guard let source = box.source.withLock({ $0 }) else { return .failure(HookMediaError("no media store is reachable from this bot")) }
        let now = Self.monotonicNow()
        if let failed = failures[id], failed.until > now { return .failure(failed.error) }
        let result = Self.wait(until: deadline) { try await source.record(id: id) }
        switch result {
        case .success(let record?): remember(record)
        case .success(nil): break
        case .failure(let error):
            if failures.count >= 1024 { failures = failures.filter { $0.value.until > now } }
            if failures.count < 1024 { failures[id] = (now + Self.failureMemory, error) }
        }
        return result
    }

    /// The first `maxBytes` bytes of `id`, waiting at most until `deadline`.
    func read(_ id: String, maxBytes: Int, deadline: Double) -> Result<[UInt8], HookMediaError> {
        guard HookMedia.isValidID(id) else { return .failure(HookMediaError("no stored file \(id)")) }
        guard let source = box.source.withLock({ $0 }) else { return .failure(HookMediaError("no media store is reachable from this bot")) }
        return Self.wait(until: deadline) { try await source.read(id: id, maxBytes: maxBytes) }.map { bytes in
            bytes.count > maxBytes ? Array(bytes.prefix(maxBytes)) : bytes
        }
    }

    /// What a hook sees of `file` besides the message's own fields: its record when it is a stored file.
    func lookup(_ file: FileInfo?, until: ContinuousClock.Instant?) -> FileLookup? {
        guard let file else { return nil }
        guard let id = file.objId, HookMedia.isValidID(id) else { return FileLookup() }
        if let hit = cache[id] { return FileLookup(record: hit) }
        var wait = HookMedia.lookupWait
        if let until {
            let left = ContinuousClock.now.duration(to: until)
            let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) * 1e-18
            wait = min(wait, max(0, seconds / 2))
        }
        switch record(id, deadline: Self.monotonicNow() + wait) {
        case .success(let record?): return FileLookup(record: record)
        case .success(nil): return FileLookup()
        case .failure(let error): return FileLookup(error: error.description)
        }
    }

    private func remember(_ record: HookMediaRecord) {
        if cache[record.id] == nil {
            if order.count < HookMedia.cacheSize {
                order.append(record.id)
            } else {
                cache[order[head]] = nil
                order[head] = record.id
                head = (head + 1) % order.count
            }
        }
        cache[record.id] = record
    }

    /// Runs `operation` off this thread and waits for it until `deadline` (monotonic seconds); past it the
    /// task is cancelled and the answer is "timed out".
    static func wait<T: Sendable>(until deadline: Double, _ operation: @escaping @Sendable () async throws -> T) -> Result<
        T, HookMediaError
    > {
        let left = deadline - monotonicNow()
        guard left > 0 else { return .failure(HookMediaError("timed out: no time left in this hook")) }
        let answer = Mutex<Result<T, HookMediaError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let task = Task.detached {
            let result: Result<T, HookMediaError>
            do {
                result = .success(try await operation())
            } catch let error as HookMediaError {
                result = .failure(error)
            } catch {
                result = .failure(HookMediaError("\(error)"))
            }
            answer.withLock { $0 = result }
            done.signal()
        }
        if done.wait(timeout: .now() + .nanoseconds(Int(left * 1e9))) == .timedOut {
            task.cancel()
            return .failure(HookMediaError("timed out after \(Int((left * 1000).rounded())) ms"))
        }
        return answer.withLock { $0 } ?? .failure(HookMediaError("no answer"))
    }
}

// MARK: - Lua side

/// Pushes the fields of a stored file's record onto the table on top of the stack.
func luaSetRecordFields(_ L: LuaRef, _ record: HookMediaRecord) {
    luaSetField(L, "id", record.id)
    if let v = record.url { luaSetField(L, "url", v) }
    if let v = record.name { luaSetField(L, "name", v) }
    let m = record.metadata
    luaSetField(L, "mime", m.mime)
    luaSetField(L, "size", int: m.size)
    if let v = m.format { luaSetField(L, "format", v) }
    if let v = m.width { luaSetField(L, "width", int: Int64(v)) }
    if let v = m.height { luaSetField(L, "height", int: Int64(v)) }
    if let v = m.duration {
        lua_pushnumber(L, v)
        luaSetFieldTop(L, "duration")
    }
    luaSetField(L, "sha256", m.sha256)
    lua_pushboolean(L, 1)
    luaSetFieldTop(L, "stored")
}

/// The time left to the running hook (monotonic seconds of its deadline), less a margin so that an answer
/// that comes at the last moment still leaves the plugin time to use it.
private func hookDeadline(_ L: LuaRef) -> Double {
    let now = MediaAccess.monotonicNow()
    guard let limits = hb_limits_of(L), limits.pointee.deadline > 0 else { return now + HookMedia.lookupWait }
    let left = limits.pointee.deadline - now
    return now + max(0, left - max(0.002, left * 0.1))
}

private func pushFailure(_ L: LuaRef, _ reason: String) -> Int32 {
    lua_pushnil(L)
    luaPush(L, reason)
    return 2
}

private func mediaID(_ L: LuaRef) -> String? {
    lua_type(L, 1) == LUA_TSTRING ? luaString(L, 1) : nil
}

/// `hb.media_info(id)`: the record's table, or nil and why.
let cbMediaInfo: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let id = mediaID(L) else { return pushFailure(L, "a file id (a string), a message or msg.file is expected") }
    switch plugin.env.media.record(id, deadline: hookDeadline(L)) {
    case .success(let record?):
        lua_createtable(L, 0, 11)
        luaSetRecordFields(L, record)
        return 1
    case .success(nil): return pushFailure(L, "no stored file \(id)")
    case .failure(let error): return pushFailure(L, error.description)
    }
}

/// `hb.media_read(id, max_bytes)`: the first bytes as a string, or nil and why.
let cbMediaRead: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let id = mediaID(L) else { return pushFailure(L, "a file id (a string), a message or msg.file is expected") }
    var wanted = HookMedia.maxRead
    if lua_type(L, 2) > LUA_TNIL {
        guard lua_isinteger(L, 2) != 0, lua_tointegerx(L, 2, nil) >= 0 else {
            return pushFailure(L, "max_bytes must be a whole number of bytes, 0 or more")
        }
        wanted = Int(min(lua_tointegerx(L, 2, nil), Int64(HookMedia.maxRead)))
    }
    // The bytes become a Lua string of the plugin's: they must fit in what its memory cap leaves.
    if let limits = hb_limits_of(L), limits.pointee.mem_cap > 0 {
        let free = Int(limits.pointee.mem_cap) - Int(limits.pointee.mem_used) - 4096
        if wanted > free {
            return pushFailure(L, "not enough memory: \(wanted) bytes do not fit in this plugin's memory cap (\(max(0, free)) bytes free)")
        }
    }
    switch plugin.env.media.read(id, maxBytes: wanted, deadline: hookDeadline(L)) {
    case .success(let bytes):
        bytes.withUnsafeBytes { raw in
            if let base = raw.baseAddress, raw.count > 0 {
                _ = lua_pushlstring(L, base.assumingMemoryBound(to: CChar.self), raw.count)
            } else {
                luaPush(L, "")
            }
        }
        return 1
    case .failure(let error): return pushFailure(L, error.description)
    }
}
