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
        if let peerId = command.peerId { g.peerID = peerId }
        if let appId = command.appId { g.appID = appId }
        if let serverTs = command.serverTs { g.serverTs = serverTs }
        if let priority = command.priority, let number = ProtocolNames.priorityNumber[priority] { g.priority = number }

        switch command.cmd {
        case .session: g.sessionMessage = sessionMessage(command)
        case .error: g.errorMessage = errorMessage(command)
        case .direct: g.directMessage = directMessage(command)
        case .ack: g.ackMessage = ackMessage(command)
        case .rcp: g.rcpMessage = rcpMessage(command)
        case .unread: g.unreadMessage = unreadMessage(command)
        case .logs: g.logsMessage = logsMessage(command)
        case .conv: g.convMessage = convMessage(command)
        case .read: g.readMessage = readMessage(command)
        case .patch: g.patchMessage = patchMessage(command)
        case .blacklist: g.blacklistMessage = blacklistMessage(command)
        case .echo:
            if command.serverTs == nil, let t = command.t { g.serverTs = t }
        case .goaway, .hook, .device: break
        }
        return g
    }

    private static func sessionMessage(_ c: Command) -> LCProtoSessionCommand {
        var s = LCProtoSessionCommand()
        if let v = c.t { s.t = v }
        if let v = c.n { s.n = v }
        if let v = c.s { s.s = v }
        if let v = c.ua { s.ua = v }
        if let v = c.r { s.r = v }
        if let v = c.tag { s.tag = v }
        if let v = c.deviceId { s.deviceID = v }
        if let v = c.st { s.st = v }
        if let v = c.stTtl { s.stTtl = Int32(clamping: v) }
        if let v = c.code { s.code = Int32(clamping: v) }
        if let v = c.reason { s.reason = v }
        if let v = c.detail { s.detail = v }
        if let v = c.sessionPeerIds { s.sessionPeerIds = v }
        if let v = c.onlineSessionPeerIds { s.onlineSessionPeerIds = v }
        if let v = c.lastPatchTime { s.lastPatchTime = v }
        if let v = c.deviceToken { s.deviceToken = v }
        return s
    }

    private static func errorMessage(_ c: Command) -> LCProtoErrorCommand {
        var e = LCProtoErrorCommand()
        e.code = Int32(clamping: c.code ?? 0)
        e.reason = c.reason ?? ""
        if let v = c.appCode { e.appCode = Int32(clamping: v) }
        if let v = c.detail { e.detail = v }
        return e
    }

    private static func directMessage(_ c: Command) -> LCProtoDirectCommand {
        var d = LCProtoDirectCommand()
        if let v = c.msg { d.msg = v }
        if let v = c.uid { d.uid = v }
        if let v = c.fromPeerId { d.fromPeerID = v }
        if let v = c.timestamp { d.timestamp = v }
        if let v = c.offline { d.offline = v }
        if let v = c.hasMore { d.hasMore_p = v }
        if let v = c.r { d.r = v }
        if let v = c.cid { d.cid = v }
        if let v = c.id { d.id = v }
        if let v = c.transient { d.transient = v }
        if let v = c.dt { d.dt = v }
        if let v = c.mentionPids { d.mentionPids = v }
        if let v = c.mentionAll { d.mentionAll = v }
        if let v = c.pushData { d.pushData = v }
        if let v = c.binaryMsg.flatMap(Self.bytes) { d.binaryMsg = v }
        if let v = c.patchTimestamp { d.patchTimestamp = v }
        if let v = c.will { d.will = v }
        return d
    }

    /// Base64 text as bytes (binary messages are base64 in the model and JSON, bytes in protobuf).
    static func bytes(_ base64: String) -> Data? { Data(base64Encoded: base64) }

    private static func ackMessage(_ c: Command) -> LCProtoAckCommand {
        var a = LCProtoAckCommand()
        if let v = c.code { a.code = Int32(clamping: v) }
        if let v = c.reason { a.reason = v }
        if let v = c.mid { a.mid = v }
        if let v = c.cid { a.cid = v }
        if let v = c.t { a.t = v }
        if let v = c.tt { a.fromts = v }
        if let v = c.uid { a.uid = v }
        if let v = c.ids { a.ids = v }
        if let v = c.appCode { a.appCode = Int32(clamping: v) }
        // LeanCloud's ack has no `detail`; SDKs show `appMsg` with a refused message.
        if let v = c.detail { a.appMsg = v }
        return a
    }

    private static func rcpMessage(_ c: Command) -> LCProtoRcpCommand {
        var r = LCProtoRcpCommand()
        if let v = c.id { r.id = v }
        if let v = c.cid { r.cid = v }
        if let v = c.t { r.t = v }
        if let v = c.read { r.read = v }
        if let v = c.from { r.from = v }
        return r
    }

    private static func unreadMessage(_ c: Command) -> LCProtoUnreadCommand {
        var u = LCProtoUnreadCommand()
        u.convs = (c.convs ?? []).map { info in
            var tuple = LCProtoUnreadTuple()
            tuple.cid = info.cid
            tuple.unread = Int32(clamping: info.unread)
            if let v = info.mid { tuple.mid = v }
            if let v = info.timestamp { tuple.timestamp = v }
            if let v = info.from { tuple.from = v }
            if let v = info.data { tuple.data = v }
            if let v = info.mentioned { tuple.mentioned = v }
            if let v = info.binaryMsg.flatMap(Self.bytes) { tuple.binaryMsg = v }
            if let v = info.patchTimestamp { tuple.patchTimestamp = v }
            return tuple
        }
        if let v = c.t { u.notifTime = v }
        return u
    }

    private static func logsMessage(_ c: Command) -> LCProtoLogsCommand {
        var l = LCProtoLogsCommand()
        if let v = c.cid { l.cid = v }
        if let v = c.limit { l.limit = Int32(clamping: v) }
        if let v = c.t { l.t = v }
        if let v = c.tt { l.tt = v }
        if let v = c.tmid { l.tmid = v }
        if let v = c.mid { l.mid = v }
        if let v = c.reversed { l.direction = v ? .new : .old }
        if let v = c.tIncluded { l.tIncluded = v }
        if let v = c.ttIncluded { l.ttIncluded = v }
        if let v = c.lctype { l.lctype = Int32(clamping: v) }
        if let logs = c.logs {
            l.logs = logs.map { item in
                var log = LCProtoLogItem()
                log.msgID = item.msgId
                log.from = item.from
                log.data = item.data
                log.timestamp = item.timestamp
                if let v = item.ackAt { log.ackAt = v }
                if let v = item.readAt { log.readAt = v }
                if let v = item.mentionPids { log.mentionPids = v }
                if let v = item.mentionAll { log.mentionAll = v }
                if let v = item.bin { log.bin = v }
                if let v = item.patchTimestamp { log.patchTimestamp = v }
                return log
            }
        }
        return l
    }

    private static func convMessage(_ c: Command) -> LCProtoConvCommand {
        var v = LCProtoConvCommand()
        if let x = c.m { v.m = x }
        if let x = c.transient { v.transient = x }
        if let x = c.unique { v.unique = x }
        if let x = c.cid { v.cid = x }
        if let x = c.cdate { v.cdate = LeanCloudDate.iso(x) }
        if let x = c.udate { v.udate = LeanCloudDate.iso(x) }
        if let x = c.initBy { v.initBy = x }
        if let x = c.sort { v.sort = ConversationAttributes.sortForSDK(x) }
        if let x = c.limit { v.limit = Int32(clamping: x) }
        if let x = c.skip { v.skip = Int32(clamping: x) }
        if let x = c.count { v.count = Int32(clamping: x) }
        if let x = c.t { v.t = x }
        if let x = c.n { v.n = x }
        if let x = c.s { v.s = x }
        if let x = c.where { v.where = json(ConversationAttributes.conditionForSDK(x)) }
        if let x = c.maxReadTimestamp { v.maxReadTimestamp = x }
        if let x = c.maxAckTimestamp { v.maxAckTimestamp = x }
        if let x = c.flag { v.flag = Int32(clamping: x) }
        if let x = c.queryAllMembers { v.queryAllMembers = x }
        if let x = c.maxReadTuples {
            v.maxReadTuples = x.map { tuple in
                var t = LCProtoMaxReadTuple()
                t.pid = tuple.pid
                if let ack = tuple.maxAckTimestamp { t.maxAckTimestamp = ack }
                if let read = tuple.maxReadTimestamp { t.maxReadTimestamp = read }
                return t
            }
        }
        if let x = c.tempConv { v.tempConv = x }
        if let x = c.tempConvTTL { v.tempConvTtl = Int32(clamping: x) }
        if let x = c.tempConvIds { v.tempConvIds = x }
        if let x = c.allowedPids { v.allowedPids = x }
        if let x = c.failedPids { v.failedPids = x.map(failureMessage) }
        if let results = c.results { v.results = json(.array(results.map(ConversationJSON.encode))) }
        if let x = c.next { v.next = x }
        if let x = c.targetClientId { v.targetClientID = x }
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

    private static func patchMessage(_ c: Command) -> LCProtoPatchCommand {
        var p = LCProtoPatchCommand()
        if let v = c.t { p.lastPatchTime = v }
        p.patches = (c.patches ?? []).map { item in
            var patch = LCProtoPatchItem()
            patch.cid = item.cid
            patch.mid = item.mid
            patch.timestamp = item.timestamp
            if let v = item.recall { patch.recall = v }
            if let v = item.data { patch.data = v }
            if let v = item.from { patch.from = v }
            if let v = item.patchTimestamp { patch.patchTimestamp = v }
            if let v = item.binaryMsg.flatMap(Self.bytes) { patch.binaryMsg = v }
            if let v = item.mentionPids { patch.mentionPids = v }
            if let v = item.mentionAll { patch.mentionAll = v }
            if let v = item.patchCode { patch.patchCode = Int64(v) }
            if let v = item.patchReason { patch.patchReason = v }
            return patch
        }
        return p
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
        if g.hasPeerID { c.peerId = g.peerID }
        if g.hasAppID { c.appId = g.appID }
        if g.hasServerTs { c.serverTs = g.serverTs }
        if g.hasPriority {
            guard let priority = ProtocolNames.priorityName[g.priority] else {
                throw fail(.invalidField, "priority must be 1 (high), 2 (normal) or 3 (low)")
            }
            c.priority = priority
        }

        switch cmd {
        case .session:
            if g.hasSessionMessage {
                let s = g.sessionMessage
                if s.hasT { c.t = s.t }
                if s.hasN { c.n = s.n }
                if s.hasS { c.s = s.s }
                if s.hasUa { c.ua = s.ua }
                if s.hasR { c.r = s.r }
                if s.hasTag { c.tag = s.tag }
                if s.hasDeviceID { c.deviceId = s.deviceID }
                if s.hasSt { c.st = s.st }
                if s.hasStTtl { c.stTtl = Int(s.stTtl) }
                if s.hasCode { c.code = Int(s.code) }
                if s.hasReason { c.reason = s.reason }
                if s.hasDetail { c.detail = s.detail }
                if !s.sessionPeerIds.isEmpty { c.sessionPeerIds = s.sessionPeerIds }
                if !s.onlineSessionPeerIds.isEmpty { c.onlineSessionPeerIds = s.onlineSessionPeerIds }
                if s.hasLastPatchTime { c.lastPatchTime = s.lastPatchTime }
                if s.hasDeviceToken { c.deviceToken = s.deviceToken }
            }
        case .error:
            if g.hasErrorMessage {
                let e = g.errorMessage
                if e.hasCode { c.code = Int(e.code) }
                if e.hasReason { c.reason = e.reason }
                if e.hasAppCode { c.appCode = Int(e.appCode) }
                if e.hasDetail { c.detail = e.detail }
            }
        case .direct:
            if g.hasDirectMessage {
                let d = g.directMessage
                if d.hasMsg { c.msg = d.msg }
                if d.hasBinaryMsg { c.binaryMsg = d.binaryMsg.base64EncodedString() }
                if d.hasPatchTimestamp { c.patchTimestamp = d.patchTimestamp }
                if d.hasUid { c.uid = d.uid }
                if d.hasFromPeerID { c.fromPeerId = d.fromPeerID }
                if d.hasTimestamp { c.timestamp = d.timestamp }
                if d.hasOffline { c.offline = d.offline }
                if d.hasHasMore_p { c.hasMore = d.hasMore_p }
                if d.hasR { c.r = d.r }
                if d.hasCid { c.cid = d.cid }
                if d.hasID { c.id = d.id }
                if d.hasTransient { c.transient = d.transient }
                if d.hasDt { c.dt = d.dt }
                if !d.mentionPids.isEmpty { c.mentionPids = d.mentionPids }
                if d.hasMentionAll { c.mentionAll = d.mentionAll }
                if d.hasPushData { c.pushData = d.pushData }
                if d.hasWill { c.will = d.will }
            }
        case .ack:
            if g.hasAckMessage {
                let a = g.ackMessage
                if a.hasCode { c.code = Int(a.code) }
                if a.hasReason { c.reason = a.reason }
                if a.hasMid { c.mid = a.mid }
                if a.hasCid { c.cid = a.cid }
                if a.hasUid { c.uid = a.uid }
                if !a.ids.isEmpty { c.ids = a.ids }
                if a.hasAppCode { c.appCode = Int(a.appCode) }
                if a.hasAppMsg { c.detail = a.appMsg }
                // SDKs acknowledge a range of timestamps [fromts, tots]: it is carried as `tt`…`t`
                // (the cursor moves to its end; the server resolves receipts in the range).
                if a.hasT { c.t = a.t } else if a.hasTots { c.t = a.tots }
                if a.hasFromts { c.tt = a.fromts }
            }
        case .rcp:
            if g.hasRcpMessage {
                let r = g.rcpMessage
                if r.hasID { c.id = r.id }
                if r.hasCid { c.cid = r.cid }
                if r.hasT { c.t = r.t }
                if r.hasRead { c.read = r.read }
                if r.hasFrom { c.from = r.from }
            }
        case .unread:
            if g.hasUnreadMessage {
                c.convs = g.unreadMessage.convs.map { tuple in
                    var info = UnreadInfo(cid: tuple.cid, unread: Int(tuple.unread))
                    if tuple.hasMid { info.mid = tuple.mid }
                    if tuple.hasTimestamp { info.timestamp = tuple.timestamp }
                    if tuple.hasFrom { info.from = tuple.from }
                    if tuple.hasData { info.data = tuple.data }
                    if tuple.hasMentioned { info.mentioned = tuple.mentioned }
                    if tuple.hasBinaryMsg { info.binaryMsg = tuple.binaryMsg.base64EncodedString() }
                    if tuple.hasPatchTimestamp { info.patchTimestamp = tuple.patchTimestamp }
                    return info
                }
                if g.unreadMessage.hasNotifTime { c.t = g.unreadMessage.notifTime }
            }
        case .logs:
            if g.hasLogsMessage {
                let l = g.logsMessage
                if l.hasCid { c.cid = l.cid }
                if l.hasLimit { c.limit = Int(l.limit) } else if l.hasL { c.limit = Int(l.l) }
                if l.hasT { c.t = l.t }
                if l.hasTt { c.tt = l.tt }
                if l.hasTmid { c.tmid = l.tmid }
                if l.hasMid { c.mid = l.mid }
                if l.hasDirection { c.reversed = l.direction == .new }
                if l.hasTIncluded { c.tIncluded = l.tIncluded }
                if l.hasTtIncluded { c.ttIncluded = l.ttIncluded }
                if l.hasLctype { c.lctype = Int(l.lctype) }
                if !l.logs.isEmpty {
                    c.logs = l.logs.map { log in
                        var item = LogItem(msgId: log.msgID, from: log.from, data: log.data, timestamp: log.timestamp)
                        if log.hasAckAt { item.ackAt = log.ackAt }
                        if log.hasReadAt { item.readAt = log.readAt }
                        if !log.mentionPids.isEmpty { item.mentionPids = log.mentionPids }
                        if log.hasMentionAll { item.mentionAll = log.mentionAll }
                        if log.hasBin { item.bin = log.bin }
                        if log.hasPatchTimestamp { item.patchTimestamp = log.patchTimestamp }
                        return item
                    }
                }
            }
        case .conv:
            if g.hasConvMessage { try decodeConv(g.convMessage, into: &c, fail: fail) }
        case .blacklist:
            if g.hasBlacklistMessage { decodeBlacklist(g.blacklistMessage, into: &c) }
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
            if g.hasPatchMessage {
                let p = g.patchMessage
                if p.hasLastPatchTime { c.t = p.lastPatchTime }
                if !p.patches.isEmpty {
                    c.patches = p.patches.map { patch in
                        var item = PatchItem(cid: patch.cid, mid: patch.mid, timestamp: patch.timestamp)
                        if patch.hasRecall { item.recall = patch.recall }
                        if patch.hasData { item.data = patch.data }
                        if patch.hasFrom { item.from = patch.from }
                        if patch.hasPatchTimestamp { item.patchTimestamp = patch.patchTimestamp }
                        if patch.hasBinaryMsg { item.binaryMsg = patch.binaryMsg.base64EncodedString() }
                        if !patch.mentionPids.isEmpty { item.mentionPids = patch.mentionPids }
                        if patch.hasMentionAll { item.mentionAll = patch.mentionAll }
                        if patch.hasPatchCode { item.patchCode = Int(clamping: patch.patchCode) }
                        if patch.hasPatchReason { item.patchReason = patch.patchReason }
                        return item
                    }
                }
            }
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
        if !v.m.isEmpty { c.m = v.m }
        if v.hasTransient { c.transient = v.transient }
        if v.hasUnique { c.unique = v.unique }
        if v.hasCid { c.cid = v.cid }
        if v.hasCdate {
            guard let ms = LeanCloudDate.millis(v.cdate) else { throw fail(.invalidField, "cdate is not a date") }
            c.cdate = ms
        }
        if v.hasUdate {
            guard let ms = LeanCloudDate.millis(v.udate) else { throw fail(.invalidField, "udate is not a date") }
            c.udate = ms
        }
        if v.hasInitBy { c.initBy = v.initBy }
        if v.hasSort { c.sort = ConversationAttributes.sortFromSDK(v.sort) }
        if v.hasLimit { c.limit = Int(v.limit) }
        if v.hasSkip { c.skip = Int(v.skip) }
        if v.hasCount { c.count = Int(v.count) }
        if v.hasT { c.t = v.t }
        if v.hasN { c.n = v.n }
        if v.hasS { c.s = v.s }
        if v.hasFlag { c.flag = Int(v.flag) }
        if v.hasQueryAllMembers { c.queryAllMembers = v.queryAllMembers }
        if !v.maxReadTuples.isEmpty {
            c.maxReadTuples = v.maxReadTuples.map { t in
                MaxReadTuple(
                    pid: t.pid, maxAckTimestamp: t.hasMaxAckTimestamp ? t.maxAckTimestamp : nil,
                    maxReadTimestamp: t.hasMaxReadTimestamp ? t.maxReadTimestamp : nil)
            }
        }
        if v.hasMaxReadTimestamp { c.maxReadTimestamp = v.maxReadTimestamp }
        if v.hasMaxAckTimestamp { c.maxAckTimestamp = v.maxAckTimestamp }
        if v.hasTempConv { c.tempConv = v.tempConv }
        if v.hasTempConvTtl { c.tempConvTTL = Int(v.tempConvTtl) }
        if !v.tempConvIds.isEmpty { c.tempConvIds = v.tempConvIds }
        if !v.allowedPids.isEmpty { c.allowedPids = v.allowedPids }
        if !v.failedPids.isEmpty { c.failedPids = v.failedPids.map(failedPids) }
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
        if v.hasNext { c.next = v.next }
        if v.hasTargetClientID { c.targetClientId = v.targetClientID }
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

    private static func jsonObject(_ command: Command) -> [String: JSONValue] {
        guard let data = try? JSONEncoder().encode(command),
            let value = try? JSONDecoder().decode(JSONValue.self, from: data)
        else { return [:] }
        return value.objectValue ?? [:]
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
            return try JSONDecoder().decode(Command.self, from: Data(JSONValue.object(object).jsonString().utf8))
        } catch {
            var field = "hookbotFields"
            if case DecodingError.typeMismatch(_, let context) = error, let key = context.codingPath.first {
                field += ".\(key.stringValue)"
            } else if case DecodingError.dataCorrupted(let context) = error, let key = context.codingPath.first {
                field += ".\(key.stringValue)"
            }
            throw CommandDecodingError(IMError(.malformedCommand, "invalid value in \(field)"), requestSerial: serial)
        }
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
