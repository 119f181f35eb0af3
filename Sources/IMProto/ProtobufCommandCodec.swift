import Foundation
import IMCore
import SwiftProtobuf

/// Encodes and decodes commands in LeanCloud's protobuf wire format: one `GenericCommand`
/// (proto/leancloud_realtime.proto) per frame. The command model is the same as for the JSON codec;
/// the server never sees which encoding a connection uses.
///
/// The mapping follows LeanCloud's SDKs (see docs/PROTOCOL.md, "Using LeanCloud SDKs with Hookbot").
/// Whatever a model command holds that the LeanCloud fields cannot express travels as JSON in the
/// Hookbot-only field `hookbotFields` (number 1000), which the SDKs skip, so that
/// `decode(encode(command)) == [command]` for every command the codec supports.
///
/// Not carried (JSON protocol only): cmd messages (`direct` with `action` / `ext`) and interceptor
/// `hook` commands. `encode` throws `ProtobufCodecError.unsupported` for them and `decode` refuses them.
public struct ProtobufCommandCodec: Sendable {
    public init() {}

    // MARK: Frames

    /// Encodes one command as the bytes of a `GenericCommand`.
    public func encode(_ command: Command) throws(ProtobufCodecError) -> [UInt8] {
        let generic = try Self.generic(from: command)
        do {
            return try generic.serializedBytes(partial: true)
        } catch {
            throw .unsupported("cannot serialize: \(error)")
        }
    }

    /// Encodes one command as base64 text (subprotocol `lc.proto2base64.3`).
    public func encodeBase64(_ command: Command) throws(ProtobufCodecError) -> String {
        Data(try encode(command)).base64EncodedString()
    }

    /// Decodes one frame. Most frames hold one command; a `read` listing several conversations
    /// becomes one command per conversation (the request serial stays on the last one).
    public func decode(_ bytes: Data) throws(CommandDecodingError) -> [Command] {
        let generic: LCProtoGenericCommand
        do {
            generic = try LCProtoGenericCommand(serializedBytes: bytes, partial: true)
        } catch {
            throw CommandDecodingError(
                IMError(.malformedCommand, "frame is not a protobuf GenericCommand"), requestSerial: nil)
        }
        // `i` is an int32: a protobuf decoder keeps the low 32 bits of a larger varint (2^32 becomes 0),
        // so the reply would answer another serial. Such a frame is refused, without a serial to echo.
        if generic.hasI, !Self.serialsFitInt32(bytes) {
            throw CommandDecodingError(
                IMError(.invalidField, "i (the request serial) must be a 32-bit integer: the proto field is int32"),
                requestSerial: nil)
        }
        return try Self.commands(from: generic)
    }

    /// Whether every top-level field 5 (`i`) in a `GenericCommand`'s bytes holds an int32 value: at most
    /// 2^31 - 1, or a negative int32 as protobuf encodes it (sign-extended to 64 bits).
    static func serialsFitInt32(_ bytes: Data) -> Bool {
        var reader = WireReader(bytes: bytes)
        while let key = reader.varint() {
            switch key & 7 {
            case 0:
                guard let value = reader.varint() else { return true }
                if key >> 3 == 5, Int64(bitPattern: value) < Int64(Int32.min) || Int64(bitPattern: value) > Int64(Int32.max) {
                    return false
                }
            case 1: reader.skip(8)
            case 2: reader.skip(reader.varint().map { Int(clamping: $0) } ?? Int.max)
            case 5: reader.skip(4)
            default: return true // groups or garbage: SwiftProtobuf already accepted the frame; i was not seen
            }
        }
        return true
    }

    /// Reads the protobuf wire format's varints and skips fields (just enough to find the raw `i`).
    private struct WireReader {
        let bytes: Data
        var offset: Data.Index

        init(bytes: Data) {
            self.bytes = bytes
            offset = bytes.startIndex
        }

        mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while offset < bytes.endIndex, shift < 64 {
                let byte = bytes[offset]
                offset += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }

        mutating func skip(_ count: Int) {
            offset = bytes.endIndex - offset < count ? bytes.endIndex : offset + count
        }
    }

    public func decode(_ bytes: [UInt8]) throws(CommandDecodingError) -> [Command] {
        try decode(Data(bytes))
    }

    /// Decodes a base64 text frame (subprotocol `lc.proto2base64.3`).
    public func decodeBase64(_ text: String) throws(CommandDecodingError) -> [Command] {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let data = Data(base64Encoded: trimmed) else {
            throw CommandDecodingError(IMError(.malformedCommand, "text frame is not base64"), requestSerial: nil)
        }
        return try decode(data)
    }

    // MARK: Model → GenericCommand

    /// The `GenericCommand` for a model command, including `hookbotFields` for what the LeanCloud
    /// fields cannot express.
    public static func generic(from command: Command) throws(ProtobufCodecError) -> LCProtoGenericCommand {
        var generic = try standardGeneric(from: command)
        // What a LeanCloud decoder would see; anything that differs goes into hookbotFields.
        let seen = try? standardCommands(from: generic)
        if seen?.count != 1 || seen?.first != command {
            let extra = Self.difference(command, seen?.last)
            if !extra.isEmpty { generic.hookbotFields = JSONValue.object(extra).jsonString() }
        }
        return generic
    }

    private static func standardGeneric(from command: Command) throws(ProtobufCodecError) -> LCProtoGenericCommand {
        if command.action != nil || command.ext != nil {
            throw .unsupported("cmd messages (action/ext) need the JSON protocol")
        }
        var g = LCProtoGenericCommand()
        guard let cmd = ProtocolNames.lcCommand[command.cmd] else {
            throw .unsupported("'\(command.cmd.rawValue)' commands need the JSON protocol")
        }
        g.cmd = cmd
        if let op = command.op {
            guard let lcOp = ProtocolNames.lcOp[op] else {
                throw .unsupported("op '\(op.rawValue)' needs the JSON protocol")
            }
            g.op = lcOp
        }
        if let i = command.i {
            guard let serial = Int32(exactly: i) else { throw .unsupported("i \(i) does not fit the proto's int32 field") }
            g.i = serial
        }
        copyFields(of: command, into: &g)
        if let priority = command.priority, let number = ProtocolNames.priorityNumber[priority] { g.priority = number }

        switch command.cmd {
        case .session: copyFields(of: command, into: &g.sessionMessage)
        case .error: g.errorMessage = errorMessage(command)
        case .direct: copyFields(of: command, into: &g.directMessage)
        case .ack: copyFields(of: command, into: &g.ackMessage)
        case .rcp: copyFields(of: command, into: &g.rcpMessage)
        case .unread: copyFields(of: command, into: &g.unreadMessage)
        case .logs: g.logsMessage = logsMessage(command)
        case .conv: g.convMessage = convMessage(command)
        case .read: g.readMessage = readMessage(command)
        case .patch: copyFields(of: command, into: &g.patchMessage)
        case .blacklist: copyFields(of: command, into: &g.blacklistMessage)
        case .echo:
            if command.serverTs == nil, let t = command.t { g.serverTs = t }
        case .goaway, .hook, .device: break
        }
        return g
    }

    private static func errorMessage(_ c: Command) -> LCProtoErrorCommand {
        var e = LCProtoErrorCommand()
        copyFields(of: c, into: &e)
        // LeanCloud's ErrorCommand requires both.
        if !e.hasCode { e.code = 0 }
        if !e.hasReason { e.reason = "" }
        return e
    }

    /// Base64 text as bytes (binary messages are base64 in the model and JSON, bytes in protobuf).
    static func bytes(_ base64: String) -> Data? { Data(base64Encoded: base64) }

    private static func logsMessage(_ c: Command) -> LCProtoLogsCommand {
        var l = LCProtoLogsCommand()
        copyFields(of: c, into: &l)
        // Not a plain copy: LeanCloud has a direction enum where the model has a flag.
        if let v = c.reversed { l.direction = v ? .new : .old }
        return l
    }

    private static func convMessage(_ c: Command) -> LCProtoConvCommand {
        var v = LCProtoConvCommand()
        copyFields(of: c, into: &v)
        // Not plain copies: dates are ISO 8601 text for LeanCloud, sort and where name custom attributes as SDKs
        // do (ConversationAttributes), results and attributes travel as JSON text.
        if let x = c.cdate { v.cdate = LeanCloudDate.iso(x) }
        if let x = c.udate { v.udate = LeanCloudDate.iso(x) }
        if let x = c.sort { v.sort = ConversationAttributes.sortForSDK(x) }
        if let x = c.where { v.where = json(ConversationAttributes.conditionForSDK(x)) }
        if let results = c.results { v.results = json(.array(results.map(ConversationJSON.encode))) }
        if let role = c.role {
            // The SDK reads the member and the role of `member-info-changed` from `info`.
            v.info.role = role
            if let x = c.targetClientId { v.info.pid = x }
        }
        var attr = c.attr
        if c.op == .start, let name = c.name {
            // LeanCloud SDKs send the name inside the attributes of `conv start`.
            var object = attr?.objectValue ?? [:]
            object["name"] = .string(name)
            attr = .object(object)
        }
        if var attr {
            if c.op == .update || c.op == .updated, let patch = attr.objectValue {
                attr = .object(ConversationAttributes.patchForSDK(patch))
            }
            v.attr = json(attr)
            if c.op == .updated { v.attrModified = json(attr) }
        }
        return v
    }

    /// Not a plain copy: a read mark is a bare `cid` in LeanCloud's ReadCommand, or a tuple when it has `mid` / `t`.
    private static func readMessage(_ c: Command) -> LCProtoReadCommand {
        var r = LCProtoReadCommand()
        guard let cid = c.cid else { return r }
        if c.mid == nil, c.t == nil {
            r.cid = cid
        } else {
            var tuple = LCProtoReadTuple()
            tuple.cid = cid
            if let v = c.mid { tuple.mid = v }
            if let v = c.t { tuple.timestamp = v }
            r.convs = [tuple]
        }
        return r
    }

    private static func json(_ value: JSONValue) -> LCProtoJsonObjectMessage {
        var message = LCProtoJsonObjectMessage()
        message.data = value.jsonString()
        return message
    }

    // MARK: GenericCommand → model

    /// The model commands of a `GenericCommand`, with `hookbotFields` applied.
    public static func commands(from generic: LCProtoGenericCommand) throws(CommandDecodingError) -> [Command] {
        var commands = try standardCommands(from: generic)
        guard generic.hasHookbotFields else { return commands }
        let serial = generic.hasI ? Int(generic.i) : nil
        guard let extra = JSONValue.parse(generic.hookbotFields)?.objectValue else {
            throw CommandDecodingError(IMError(.malformedCommand, "hookbotFields is not a JSON object"), requestSerial: serial)
        }
        for key in ["cmd", "action", "ext"] where extra[key] != nil {
            throw CommandDecodingError(
                IMError(.unknownCommand, "hookbotFields cannot set '\(key)': cmd messages and hook commands need the JSON protocol"),
                requestSerial: serial)
        }
        for index in commands.indices {
            commands[index] = try overlay(extra, on: commands[index], serial: serial)
        }
        return commands
    }

    private static func standardCommands(from g: LCProtoGenericCommand) throws(CommandDecodingError) -> [Command] {
        let serial = g.hasI ? Int(g.i) : nil
        func fail(_ code: IMErrorCode, _ detail: String) -> CommandDecodingError {
            CommandDecodingError(IMError(code, detail), requestSerial: serial)
        }
        guard g.hasCmd else { throw fail(.malformedCommand, "missing or unknown field 'cmd'") }
        guard let cmd = ProtocolNames.modelCommand[g.cmd] else {
            throw fail(.unknownCommand, "cmd '\(g.cmd)' is not supported by Hookbot")
        }
        var c = Command(cmd: cmd, i: serial)
        if g.hasOp {
            guard let op = ProtocolNames.modelOp[g.op] else {
                throw fail(.unknownCommand, "op '\(g.op)' is not supported by Hookbot")
            }
            c.op = op
        }
        copyFields(of: g, into: &c)
        if g.hasPriority {
            guard let priority = ProtocolNames.priorityName[g.priority] else {
                throw fail(.invalidField, "priority must be 1 (high), 2 (normal) or 3 (low)")
            }
            c.priority = priority
        }

        switch cmd {
        case .session:
            if g.hasSessionMessage { copyFields(of: g.sessionMessage, into: &c) }
        case .error:
            if g.hasErrorMessage { copyFields(of: g.errorMessage, into: &c) }
        case .direct:
            if g.hasDirectMessage { copyFields(of: g.directMessage, into: &c) }
        case .ack:
            if g.hasAckMessage {
                copyFields(of: g.ackMessage, into: &c)
                // SDKs acknowledge a range of timestamps [fromts, tots]: it is carried as `tt`…`t`
                // (the cursor moves to its end; the server resolves receipts in the range).
                if !g.ackMessage.hasT, g.ackMessage.hasTots { c.t = g.ackMessage.tots }
            }
        case .rcp:
            if g.hasRcpMessage { copyFields(of: g.rcpMessage, into: &c) }
        case .unread:
            if g.hasUnreadMessage {
                copyFields(of: g.unreadMessage, into: &c)
                // The list is there, if empty, whenever the message is.
                if c.convs == nil { c.convs = [] }
            }
        case .logs:
            if g.hasLogsMessage {
                let l = g.logsMessage
                copyFields(of: l, into: &c)
                // `l` is the older SDKs' name of `limit`.
                if !l.hasLimit, l.hasL { c.limit = Int(l.l) }
                if l.hasDirection { c.reversed = l.direction == .new }
            }
        case .conv:
            if g.hasConvMessage { try decodeConv(g.convMessage, into: &c, fail: fail) }
        case .blacklist:
            if g.hasBlacklistMessage { copyFields(of: g.blacklistMessage, into: &c) }
        case .read:
            if g.hasReadMessage {
                let r = g.readMessage
                var reads: [Command] = []
                func read(_ cid: String, mid: String?, t: Int64?) {
                    var one = c
                    one.i = nil
                    one.cid = cid
                    one.mid = mid
                    one.t = t
                    reads.append(one)
                }
                if r.hasCid { read(r.cid, mid: nil, t: nil) }
                for cid in r.cids { read(cid, mid: nil, t: nil) }
                for tuple in r.convs {
                    read(tuple.cid, mid: tuple.hasMid ? tuple.mid : nil, t: tuple.hasTimestamp ? tuple.timestamp : nil)
                }
                if !reads.isEmpty {
                    reads[reads.count - 1].i = serial
                    return reads
                }
            }
        case .patch:
            if g.hasPatchMessage { copyFields(of: g.patchMessage, into: &c) }
        case .echo:
            if g.hasServerTs {
                c.t = g.serverTs
                c.serverTs = nil
            }
        case .goaway, .hook, .device:
            break
        }
        return [c]
    }

    private static func decodeConv(
        _ v: LCProtoConvCommand, into c: inout Command,
        fail: (IMErrorCode, String) -> CommandDecodingError
    ) throws(CommandDecodingError) {
        copyFields(of: v, into: &c)
        // Not plain copies (see convMessage): dates, SDK attribute names, JSON text, `info`.
        if v.hasCdate {
            guard let ms = LeanCloudDate.millis(v.cdate) else { throw fail(.invalidField, "cdate is not a date") }
            c.cdate = ms
        }
        if v.hasUdate {
            guard let ms = LeanCloudDate.millis(v.udate) else { throw fail(.invalidField, "udate is not a date") }
            c.udate = ms
        }
        if v.hasSort { c.sort = ConversationAttributes.sortFromSDK(v.sort) }
        if v.hasWhere {
            guard let value = JSONValue.parse(v.where.data) else { throw fail(.malformedCommand, "where is not JSON") }
            c.where = ConversationAttributes.conditionFromSDK(value)
        }
        if v.hasResults {
            guard let array = JSONValue.parse(v.results.data)?.arrayValue else {
                throw fail(.malformedCommand, "results is not a JSON array")
            }
            var results: [ConversationInfo] = []
            for (index, element) in array.enumerated() {
                guard let info = ConversationJSON.decode(element) else {
                    throw fail(.malformedCommand, "results[\(index)] is not a conversation")
                }
                results.append(info)
            }
            c.results = results
        }
        let attrMessage = v.hasAttr ? v.attr : (v.hasAttrModified ? v.attrModified : nil)
        if v.hasInfo {
            if v.info.hasPid, c.targetClientId == nil { c.targetClientId = v.info.pid }
            if v.info.hasRole { c.role = v.info.role }
        }
        if let attrMessage {
            guard var attr = JSONValue.parse(attrMessage.data) else { throw fail(.malformedCommand, "attr is not JSON") }
            if c.op == .start, var object = attr.objectValue, let name = object["name"] {
                guard let text = name.stringValue else { throw fail(.invalidField, "attr.name must be a string") }
                c.name = text
                object["name"] = nil
                attr = .object(object)
                c.attr = object.isEmpty ? nil : attr
            } else if c.op == .update || c.op == .updated, let patch = attr.objectValue {
                c.attr = .object(ConversationAttributes.patchFromSDK(patch))
            } else {
                c.attr = attr
            }
        }
    }

    // MARK: hookbotFields

    /// The command's fields as its JSON frame has them.
    private static func jsonObject(_ command: Command) -> [String: JSONValue] {
        JSONValue.parse(JSONCommandCodec().encode(command))?.objectValue ?? [:]
    }

    /// The top-level fields of `original` that `seen` lacks or holds differently; `null` for fields
    /// `seen` has and `original` has not.
    static func difference(_ original: Command, _ seen: Command?) -> [String: JSONValue] {
        let want = jsonObject(original)
        let have = seen.map(jsonObject) ?? [:]
        var extra: [String: JSONValue] = [:]
        for (key, value) in want where key != "cmd" && have[key] != value { extra[key] = value }
        for key in have.keys where want[key] == nil && key != "cmd" { extra[key] = .null }
        return extra
    }

    private static func overlay(_ extra: [String: JSONValue], on command: Command, serial: Int?) throws(CommandDecodingError) -> Command {
        var object = jsonObject(command)
        for (key, value) in extra {
            if value == .null { object[key] = nil } else { object[key] = value }
        }
        do {
            return try JSONCommandCodec().decode(JSONValue.object(object).jsonString())
        } catch {
            throw CommandDecodingError(
                IMError(.malformedCommand, "invalid value in hookbotFields.\(Self.field(of: error))"), requestSerial: serial)
        }
    }

    /// The top-level field a JSON decoding error names (`results` for "invalid value for field 'results.0.m'").
    private static func field(of error: CommandDecodingError) -> String {
        let detail = error.error.detail ?? ""
        guard let open = detail.firstIndex(of: "'") else { return "" }
        return String(detail[detail.index(after: open)...].prefix { $0 != "'" && $0 != "." })
    }
}

/// Why a command cannot be encoded as protobuf.
public enum ProtobufCodecError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The command exists only in Hookbot's JSON protocol.
    case unsupported(String)

    public var description: String {
        switch self {
        case .unsupported(let detail): detail
        }
    }
}
