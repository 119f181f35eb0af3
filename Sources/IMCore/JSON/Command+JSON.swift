// Mapping between `Command` (and its nested structs) and JSON bytes, without Codable: the decoder
// walks the frame with `JSONReader` and matches keys as bytes (see JSONReader.swift for why this is
// hand-written). The field tables below follow the declaration order in Command.swift; the
// switches were written from that list, so a new field needs a line in each.

/// Where a field's value was wrong, as the path below that field (`["0", "m"]`).
struct JSONFieldFailure: Sendable, Equatable {
    var path: [String]
    /// A required field was absent (rather than of the wrong type).
    var missing: Bool

    static let here = JSONFieldFailure(path: [], missing: false)

    static func missing(_ field: String) -> JSONFieldFailure {
        JSONFieldFailure(path: [field], missing: true)
    }

    func below(_ component: String) -> JSONFieldFailure {
        JSONFieldFailure(path: [component] + path, missing: missing)
    }

    /// The detail of the 4901 error.
    var detail: String {
        let dotted = path.joined(separator: ".")
        return missing ? "missing field '\(dotted)'" : "invalid value for field '\(dotted)'"
    }
}

/// A field value as decoded: the value, or where it was wrong (the value has been skipped then).
enum JSONDecoded<Value> {
    case value(Value)
    case invalid(JSONFieldFailure)
}

/// Maps null to an error: for fields that are not optional.
@inline(__always) func requiredValue<T>(_ decoded: JSONDecoded<T?>) -> JSONDecoded<T?> {
    if case .value(nil) = decoded { return .invalid(.here) }
    return decoded
}

/// The type errors of one object's fields, by field number. As with values, the last occurrence of
/// a duplicated key decides.
struct JSONFieldErrors {
    private var failures: [(field: Int, failure: JSONFieldFailure)] = []

    @inline(__always) mutating func take<T>(_ decoded: JSONDecoded<T?>, _ field: Int) -> T? {
        if !failures.isEmpty { failures.removeAll { $0.field == field } }
        switch decoded {
        case .value(let value):
            return value
        case .invalid(let failure):
            failures.append((field, failure))
            return nil
        }
    }

    func has(_ field: Int) -> Bool {
        failures.contains { $0.field == field }
    }

    /// The first failure in the object, with its field's name in front.
    func first(in keys: JSONKeyTable) -> JSONFieldFailure? {
        failures.first.map { $0.failure.below(keys.names[$0.field]) }
    }
}

/// The state of `cmd` or `op` after reading a frame.
enum JSONEnumField<Value> {
    case absent
    case invalid
    case unknown(String)
    case known(Value)
}

let commandTypes = CommandType.allCases
let commandTypeKeys = JSONKeyTable(commandTypes.map(\.rawValue))
let opTypes = OpType.allCases
let opTypeKeys = JSONKeyTable(opTypes.map(\.rawValue))

extension JSONReader {
    @inline(__always) private static func startsNumber(_ b: UInt8) -> Bool {
        b == .minus || b &- 0x30 < 10
    }

    /// A string, or null (nil).
    mutating func decodeString() throws(JSONSyntaxError) -> JSONDecoded<String?> {
        switch peek() {
        case .quote?: return .value(try readString())
        case .lowerN?:
            try readNull()
            return .value(nil)
        default:
            try skipValue()
            return .invalid(.here)
        }
    }

    /// A whole number within Int64 (however written: `3`, `3.0`, `3e0`), or null (nil).
    mutating func decodeInt64() throws(JSONSyntaxError) -> JSONDecoded<Int64?> {
        guard let b = peek() else { throw error("unexpected end of input") }
        if Self.startsNumber(b) {
            let token = try scanNumber()
            if let value = exactInteger(token) { return .value(value) }
            return .invalid(.here)
        }
        if b == .lowerN {
            try readNull()
            return .value(nil)
        }
        try skipValue()
        return .invalid(.here)
    }

    mutating func decodeInt() throws(JSONSyntaxError) -> JSONDecoded<Int?> {
        switch try decodeInt64() {
        case .value(nil): return .value(nil)
        case .value(let value?):
            guard let int = Int(exactly: value) else { return .invalid(.here) }
            return .value(int)
        case .invalid(let failure): return .invalid(failure)
        }
    }

    mutating func decodeBool() throws(JSONSyntaxError) -> JSONDecoded<Bool?> {
        switch peek() {
        case .lowerT?, .lowerF?: return .value(try readBool())
        case .lowerN?:
            try readNull()
            return .value(nil)
        default:
            try skipValue()
            return .invalid(.here)
        }
    }

    /// An array of elements decoded by `element`, or null (nil). The first bad element is reported
    /// (by index); the rest of the array is still read.
    mutating func decodeArray<Element>(
        _ element: (inout JSONReader) throws(JSONSyntaxError) -> JSONDecoded<Element>
    ) throws(JSONSyntaxError) -> JSONDecoded<[Element]?> {
        switch peek() {
        case .openBracket?:
            var elements: [Element] = []
            var failure: JSONFieldFailure?
            if try beginArray() {
                repeat {
                    switch try element(&self) {
                    case .value(let value):
                        if failure == nil { elements.append(value) }
                    case .invalid(let bad):
                        if failure == nil { failure = bad.below(String(elements.count)) }
                    }
                } while try nextElement()
            }
            if let failure { return .invalid(failure) }
            return .value(elements)
        case .lowerN?:
            try readNull()
            return .value(nil)
        default:
            try skipValue()
            return .invalid(.here)
        }
    }

    mutating func decodeStrings() throws(JSONSyntaxError) -> JSONDecoded<[String]?> {
        try decodeArray { (reader: inout JSONReader) throws(JSONSyntaxError) -> JSONDecoded<String> in
            guard reader.peek() == .quote else {
                try reader.skipValue()
                return .invalid(.here)
            }
            return .value(try reader.readString())
        }
    }

    /// Any JSON value but null (nil); a number beyond Double's range is invalid.
    mutating func decodeAny() throws(JSONSyntaxError) -> JSONDecoded<JSONValue?> {
        if peek() == .lowerN {
            try readNull()
            return .value(nil)
        }
        sawUnrepresentableNumber = false
        let value = try readValue()
        return sawUnrepresentableNumber ? .invalid(.here) : .value(value)
    }

    /// An object of JSON values, or null (nil).
    mutating func decodeObject() throws(JSONSyntaxError) -> JSONDecoded<[String: JSONValue]?> {
        switch peek() {
        case .openBrace?:
            sawUnrepresentableNumber = false
            guard case .object(let object) = try readValue(), !sawUnrepresentableNumber else { return .invalid(.here) }
            return .value(object)
        case .lowerN?:
            try readNull()
            return .value(nil)
        default:
            try skipValue()
            return .invalid(.here)
        }
    }

    /// A string naming one of `cases` (by their keys in `table`), or null (absent).
    mutating func decodeEnum<Value>(
        _ table: JSONKeyTable, _ cases: [Value]
    ) throws(JSONSyntaxError) -> JSONEnumField<Value> {
        switch peek() {
        case .quote?:
            let start = position
            let index = try readStringIndex(in: table)
            if index >= 0 { return .known(cases[index]) }
            // Read it again as a String, for the error message.
            position = start
            return .unknown(try readString())
        case .lowerN?:
            try readNull()
            return .absent
        default:
            try skipValue()
            return .invalid
        }
    }
}

extension Command {
    /// Decodes one frame into `command` (a fresh one: only the frame's fields are set). Errors, in
    /// this order: not a JSON object (4901, no serial), `cmd` missing or not a string (4901), unknown
    /// `cmd` or `op` (4902), `op` not a string or a field of the wrong type (4901, naming the field).
    /// The serial is the frame's `i` whenever that is an integer.
    static func decodeJSON(_ bytes: UnsafeBufferPointer<UInt8>, into command: inout Command) -> CommandDecodingError? {
        var reader = JSONReader(bytes)
        var cmd = JSONEnumField<CommandType>.absent
        var op = JSONEnumField<OpType>.absent
        var errors = JSONFieldErrors()
        do throws(JSONSyntaxError) {
            guard reader.peek() == .openBrace else { throw reader.error("not an object") }
            if try reader.beginObject() {
                try command.decodeJSONMembers(&reader, cmd: &cmd, op: &op, errors: &errors)
            }
            try reader.expectEnd()
        } catch {
            let detail = error.kind == .tooDeep ? error.message : "frame is not a JSON object"
            return CommandDecodingError(error: IMError(.malformedCommand, detail), requestSerial: nil)
        }
        let serial = errors.has(2) ? nil : command.i // field 2 is `i`
        func fail(_ code: IMErrorCode, _ detail: String) -> CommandDecodingError {
            CommandDecodingError(error: IMError(code, detail), requestSerial: serial)
        }
        switch cmd {
        case .absent: return fail(.malformedCommand, "missing field 'cmd'")
        case .invalid: return fail(.malformedCommand, "invalid value for field 'cmd'")
        case .unknown(let name): return fail(.unknownCommand, "unknown cmd '\(name)'")
        case .known(let type): command.cmd = type
        }
        switch op {
        case .absent: break
        case .invalid: return fail(.malformedCommand, "invalid value for field 'op'")
        case .unknown(let name): return fail(.unknownCommand, "unknown op '\(name)'")
        case .known(let type): command.op = type
        }
        if let failure = errors.first(in: jsonKeys) { return fail(.malformedCommand, failure.detail) }
        return nil
    }

    /// Field names in declaration order: a name's index is its number in `decodeJSON` and the order
    /// `writeJSON` writes fields in.
    static let jsonKeys = JSONKeyTable([
        "cmd", "op", "i", "peerId", "appId", "serverTs", "code", "reason", "detail", "appCode", "tag",
        "deviceId", "r", "t", "n", "s", "st", "stTtl", "ua", "cid", "msg", "id", "fromPeerId", "timestamp",
        "transient", "offline", "hasMore", "dt", "priority", "mentionPids", "mentionAll", "action", "ext",
        "uid", "mid", "ids", "read", "from", "m", "unique", "name", "attr", "where", "limit", "skip", "sort",
        "c", "initBy", "results", "count", "lm", "mu", "cdate", "udate", "tt", "tmid", "logs", "reversed",
        "convs", "patches", "verdict", "silent", "kind", "tempConv", "tempConvTTL", "tempConvIds", "allowedPids",
        "failedPids", "sessionPeerIds", "onlineSessionPeerIds", "maxReadTimestamp", "maxAckTimestamp",
        "next", "srcCid", "toPids", "blockedPids", "duration", "all", "targetClientId", "role",
        "binaryMsg", "patchTimestamp",
        "flag", "will", "tIncluded", "ttIncluded", "lctype", "queryAllMembers", "maxReadTuples", "lastPatchTime",
        "deviceToken", "device", "devices", "pushData",
    ])

    /// Decodes the members of the frame's object (the reader is past its `{`).
    fileprivate mutating func decodeJSONMembers(
        _ reader: inout JSONReader, cmd: inout JSONEnumField<CommandType>, op: inout JSONEnumField<OpType>,
        errors: inout JSONFieldErrors
    ) throws(JSONSyntaxError) {
        repeat {
            switch try reader.readKeyIndex(in: Command.jsonKeys) {
            case 0: cmd = try reader.decodeEnum(commandTypeKeys, commandTypes)
            case 1: op = try reader.decodeEnum(opTypeKeys, opTypes)
            case 2: self.i = errors.take(try reader.decodeInt(), 2)
            case 3: self.peerId = errors.take(try reader.decodeString(), 3)
            case 4: self.appId = errors.take(try reader.decodeString(), 4)
            case 5: self.serverTs = errors.take(try reader.decodeInt64(), 5)
            case 6: self.code = errors.take(try reader.decodeInt(), 6)
            case 7: self.reason = errors.take(try reader.decodeString(), 7)
            case 8: self.detail = errors.take(try reader.decodeString(), 8)
            case 9: self.appCode = errors.take(try reader.decodeInt(), 9)
            case 10: self.tag = errors.take(try reader.decodeString(), 10)
            case 11: self.deviceId = errors.take(try reader.decodeString(), 11)
            case 12: self.r = errors.take(try reader.decodeBool(), 12)
            case 13: self.t = errors.take(try reader.decodeInt64(), 13)
            case 14: self.n = errors.take(try reader.decodeString(), 14)
            case 15: self.s = errors.take(try reader.decodeString(), 15)
            case 16: self.st = errors.take(try reader.decodeString(), 16)
            case 17: self.stTtl = errors.take(try reader.decodeInt(), 17)
            case 18: self.ua = errors.take(try reader.decodeString(), 18)
            case 19: self.cid = errors.take(try reader.decodeString(), 19)
            case 20: self.msg = errors.take(try reader.decodeString(), 20)
            case 21: self.id = errors.take(try reader.decodeString(), 21)
            case 22: self.fromPeerId = errors.take(try reader.decodeString(), 22)
            case 23: self.timestamp = errors.take(try reader.decodeInt64(), 23)
            case 24: self.transient = errors.take(try reader.decodeBool(), 24)
            case 25: self.offline = errors.take(try reader.decodeBool(), 25)
            case 26: self.hasMore = errors.take(try reader.decodeBool(), 26)
            case 27: self.dt = errors.take(try reader.decodeString(), 27)
            case 28: self.priority = errors.take(try reader.decodeString(), 28)
            case 29: self.mentionPids = errors.take(try reader.decodeStrings(), 29)
            case 30: self.mentionAll = errors.take(try reader.decodeBool(), 30)
            case 31: self.action = errors.take(try reader.decodeString(), 31)
            case 32: self.ext = errors.take(try reader.decodeObject(), 32)
            case 33: self.uid = errors.take(try reader.decodeString(), 33)
            case 34: self.mid = errors.take(try reader.decodeString(), 34)
            case 35: self.ids = errors.take(try reader.decodeStrings(), 35)
            case 36: self.read = errors.take(try reader.decodeBool(), 36)
            case 37: self.from = errors.take(try reader.decodeString(), 37)
            case 38: self.m = errors.take(try reader.decodeStrings(), 38)
            case 39: self.unique = errors.take(try reader.decodeBool(), 39)
            case 40: self.name = errors.take(try reader.decodeString(), 40)
            case 41: self.attr = errors.take(try reader.decodeAny(), 41)
            case 42: self.`where` = errors.take(try reader.decodeAny(), 42)
            case 43: self.limit = errors.take(try reader.decodeInt(), 43)
            case 44: self.skip = errors.take(try reader.decodeInt(), 44)
            case 45: self.sort = errors.take(try reader.decodeString(), 45)
            case 46: self.c = errors.take(try reader.decodeString(), 46)
            case 47: self.initBy = errors.take(try reader.decodeString(), 47)
            case 48: self.results = errors.take(try reader.decodeArray(ConversationInfo.decodeJSON), 48)
            case 49: self.count = errors.take(try reader.decodeInt(), 49)
            case 50: self.lm = errors.take(try reader.decodeInt64(), 50)
            case 51: self.mu = errors.take(try reader.decodeStrings(), 51)
            case 52: self.cdate = errors.take(try reader.decodeInt64(), 52)
            case 53: self.udate = errors.take(try reader.decodeInt64(), 53)
            case 54: self.tt = errors.take(try reader.decodeInt64(), 54)
            case 55: self.tmid = errors.take(try reader.decodeString(), 55)
            case 56: self.logs = errors.take(try reader.decodeArray(LogItem.decodeJSON), 56)
            case 57: self.reversed = errors.take(try reader.decodeBool(), 57)
            case 58: self.convs = errors.take(try reader.decodeArray(UnreadInfo.decodeJSON), 58)
            case 59: self.patches = errors.take(try reader.decodeArray(PatchItem.decodeJSON), 59)
            case 60: self.verdict = errors.take(try reader.decodeString(), 60)
            case 61: self.silent = errors.take(try reader.decodeBool(), 61)
            case 62: self.kind = errors.take(try reader.decodeString(), 62)
            case 63: self.tempConv = errors.take(try reader.decodeBool(), 63)
            case 64: self.tempConvTTL = errors.take(try reader.decodeInt(), 64)
            case 65: self.tempConvIds = errors.take(try reader.decodeStrings(), 65)
            case 66: self.allowedPids = errors.take(try reader.decodeStrings(), 66)
            case 67: self.failedPids = errors.take(try reader.decodeArray(FailedPids.decodeJSON), 67)
            case 68: self.sessionPeerIds = errors.take(try reader.decodeStrings(), 68)
            case 69: self.onlineSessionPeerIds = errors.take(try reader.decodeStrings(), 69)
            case 70: self.maxReadTimestamp = errors.take(try reader.decodeInt64(), 70)
            case 71: self.maxAckTimestamp = errors.take(try reader.decodeInt64(), 71)
            case 72: self.next = errors.take(try reader.decodeString(), 72)
            case 73: self.srcCid = errors.take(try reader.decodeString(), 73)
            case 74: self.toPids = errors.take(try reader.decodeStrings(), 74)
            case 75: self.blockedPids = errors.take(try reader.decodeStrings(), 75)
            case 76: self.duration = errors.take(try reader.decodeInt(), 76)
            case 77: self.all = errors.take(try reader.decodeBool(), 77)
            case 78: self.targetClientId = errors.take(try reader.decodeString(), 78)
            case 79: self.role = errors.take(try reader.decodeString(), 79)
            case 80: self.binaryMsg = errors.take(try reader.decodeString(), 80)
            case 81: self.patchTimestamp = errors.take(try reader.decodeInt64(), 81)
            case 82: self.flag = errors.take(try reader.decodeInt(), 82)
            case 83: self.will = errors.take(try reader.decodeBool(), 83)
            case 84: self.tIncluded = errors.take(try reader.decodeBool(), 84)
            case 85: self.ttIncluded = errors.take(try reader.decodeBool(), 85)
            case 86: self.lctype = errors.take(try reader.decodeInt(), 86)
            case 87: self.queryAllMembers = errors.take(try reader.decodeBool(), 87)
            case 88: self.maxReadTuples = errors.take(try reader.decodeArray(MaxReadTuple.decodeJSON), 88)
            case 89: self.lastPatchTime = errors.take(try reader.decodeInt64(), 89)
            case 90: self.deviceToken = errors.take(try reader.decodeString(), 90)
            case 91: self.device = errors.take(try reader.decodeAny(), 91)
            case 92: self.devices = errors.take(try reader.decodeAny(), 92)
            case 93:
                // LeanCloud's SDKs send the JSON object's text; an object is taken as well, nothing else (4901).
                var decoded = try reader.decodeAny()
                if case .value(let v?) = decoded, v != .null, v.stringValue == nil, v.objectValue == nil { decoded = .invalid(.here) }
                let value = errors.take(decoded, 93)
                self.pushData = value.flatMap { $0 == .null ? nil : ($0.stringValue ?? $0.jsonString()) }
            default: try reader.skipValue()
            }
        } while try reader.nextMember()
    }

    /// Writes the command as one compact JSON object: the fields that are set, in declaration order.
    func writeJSON(into out: inout JSONOutput) {
        out.appendJSONRaw(#"{"cmd":"#)
        out.appendJSONString(cmd.rawValue)
        if let v = op {
            out.appendJSONRaw(#","op":"#)
            out.appendJSONString(v.rawValue)
        }
        if let v = self.i {
            out.appendJSONRaw(#","i":"#)
            out.appendJSONInt(v)
        }
        if let v = self.peerId {
            out.appendJSONRaw(#","peerId":"#)
            out.appendJSONString(v)
        }
        if let v = self.appId {
            out.appendJSONRaw(#","appId":"#)
            out.appendJSONString(v)
        }
        if let v = self.serverTs {
            out.appendJSONRaw(#","serverTs":"#)
            out.appendJSONInt(v)
        }
        if let v = self.code {
            out.appendJSONRaw(#","code":"#)
            out.appendJSONInt(v)
        }
        if let v = self.reason {
            out.appendJSONRaw(#","reason":"#)
            out.appendJSONString(v)
        }
        if let v = self.detail {
            out.appendJSONRaw(#","detail":"#)
            out.appendJSONString(v)
        }
        if let v = self.appCode {
            out.appendJSONRaw(#","appCode":"#)
            out.appendJSONInt(v)
        }
        if let v = self.tag {
            out.appendJSONRaw(#","tag":"#)
            out.appendJSONString(v)
        }
        if let v = self.deviceId {
            out.appendJSONRaw(#","deviceId":"#)
            out.appendJSONString(v)
        }
        if let v = self.r {
            out.appendJSONRaw(#","r":"#)
            out.appendJSONBool(v)
        }
        if let v = self.t {
            out.appendJSONRaw(#","t":"#)
            out.appendJSONInt(v)
        }
        if let v = self.n {
            out.appendJSONRaw(#","n":"#)
            out.appendJSONString(v)
        }
        if let v = self.s {
            out.appendJSONRaw(#","s":"#)
            out.appendJSONString(v)
        }
        if let v = self.st {
            out.appendJSONRaw(#","st":"#)
            out.appendJSONString(v)
        }
        if let v = self.stTtl {
            out.appendJSONRaw(#","stTtl":"#)
            out.appendJSONInt(v)
        }
        if let v = self.ua {
            out.appendJSONRaw(#","ua":"#)
            out.appendJSONString(v)
        }
        if let v = self.cid {
            out.appendJSONRaw(#","cid":"#)
            out.appendJSONString(v)
        }
        if let v = self.msg {
            out.appendJSONRaw(#","msg":"#)
            out.appendJSONString(v)
        }
        if let v = self.id {
            out.appendJSONRaw(#","id":"#)
            out.appendJSONString(v)
        }
        if let v = self.fromPeerId {
            out.appendJSONRaw(#","fromPeerId":"#)
            out.appendJSONString(v)
        }
        if let v = self.timestamp {
            out.appendJSONRaw(#","timestamp":"#)
            out.appendJSONInt(v)
        }
        if let v = self.transient {
            out.appendJSONRaw(#","transient":"#)
            out.appendJSONBool(v)
        }
        if let v = self.offline {
            out.appendJSONRaw(#","offline":"#)
            out.appendJSONBool(v)
        }
        if let v = self.hasMore {
            out.appendJSONRaw(#","hasMore":"#)
            out.appendJSONBool(v)
        }
        if let v = self.dt {
            out.appendJSONRaw(#","dt":"#)
            out.appendJSONString(v)
        }
        if let v = self.priority {
            out.appendJSONRaw(#","priority":"#)
            out.appendJSONString(v)
        }
        if let v = self.mentionPids {
            out.appendJSONRaw(#","mentionPids":"#)
            out.appendJSONStrings(v)
        }
        if let v = self.mentionAll {
            out.appendJSONRaw(#","mentionAll":"#)
            out.appendJSONBool(v)
        }
        if let v = self.action {
            out.appendJSONRaw(#","action":"#)
            out.appendJSONString(v)
        }
        if let v = self.ext {
            out.appendJSONRaw(#","ext":"#)
            out.appendJSONObject(v)
        }
        if let v = self.uid {
            out.appendJSONRaw(#","uid":"#)
            out.appendJSONString(v)
        }
        if let v = self.mid {
            out.appendJSONRaw(#","mid":"#)
            out.appendJSONString(v)
        }
        if let v = self.ids {
            out.appendJSONRaw(#","ids":"#)
            out.appendJSONStrings(v)
        }
        if let v = self.read {
            out.appendJSONRaw(#","read":"#)
            out.appendJSONBool(v)
        }
        if let v = self.from {
            out.appendJSONRaw(#","from":"#)
            out.appendJSONString(v)
        }
        if let v = self.m {
            out.appendJSONRaw(#","m":"#)
            out.appendJSONStrings(v)
        }
        if let v = self.unique {
            out.appendJSONRaw(#","unique":"#)
            out.appendJSONBool(v)
        }
        if let v = self.name {
            out.appendJSONRaw(#","name":"#)
            out.appendJSONString(v)
        }
        if let v = self.attr {
            out.appendJSONRaw(#","attr":"#)
            out.appendJSONValue(v)
        }
        if let v = self.`where` {
            out.appendJSONRaw(#","where":"#)
            out.appendJSONValue(v)
        }
        if let v = self.limit {
            out.appendJSONRaw(#","limit":"#)
            out.appendJSONInt(v)
        }
        if let v = self.skip {
            out.appendJSONRaw(#","skip":"#)
            out.appendJSONInt(v)
        }
        if let v = self.sort {
            out.appendJSONRaw(#","sort":"#)
            out.appendJSONString(v)
        }
        if let v = self.c {
            out.appendJSONRaw(#","c":"#)
            out.appendJSONString(v)
        }
        if let v = self.initBy {
            out.appendJSONRaw(#","initBy":"#)
            out.appendJSONString(v)
        }
        if let v = self.results {
            out.appendJSONRaw(#","results":"#)
            out.appendJSONArray(v) { $0.writeJSON(into: &$1) }
        }
        if let v = self.count {
            out.appendJSONRaw(#","count":"#)
            out.appendJSONInt(v)
        }
        if let v = self.lm {
            out.appendJSONRaw(#","lm":"#)
            out.appendJSONInt(v)
        }
        if let v = self.mu {
            out.appendJSONRaw(#","mu":"#)
            out.appendJSONStrings(v)
        }
        if let v = self.cdate {
            out.appendJSONRaw(#","cdate":"#)
            out.appendJSONInt(v)
        }
        if let v = self.udate {
            out.appendJSONRaw(#","udate":"#)
            out.appendJSONInt(v)
        }
        if let v = self.tt {
            out.appendJSONRaw(#","tt":"#)
            out.appendJSONInt(v)
        }
        if let v = self.tmid {
            out.appendJSONRaw(#","tmid":"#)
            out.appendJSONString(v)
        }
        if let v = self.logs {
            out.appendJSONRaw(#","logs":"#)
            out.appendJSONArray(v) { $0.writeJSON(into: &$1) }
        }
        if let v = self.reversed {
            out.appendJSONRaw(#","reversed":"#)
            out.appendJSONBool(v)
        }
        if let v = self.convs {
            out.appendJSONRaw(#","convs":"#)
            out.appendJSONArray(v) { $0.writeJSON(into: &$1) }
        }
        if let v = self.patches {
            out.appendJSONRaw(#","patches":"#)
            out.appendJSONArray(v) { $0.writeJSON(into: &$1) }
        }
        if let v = self.verdict {
            out.appendJSONRaw(#","verdict":"#)
            out.appendJSONString(v)
        }
        if let v = self.silent {
            out.appendJSONRaw(#","silent":"#)
            out.appendJSONBool(v)
        }
        if let v = self.kind {
            out.appendJSONRaw(#","kind":"#)
            out.appendJSONString(v)
        }
        if let v = self.tempConv {
            out.appendJSONRaw(#","tempConv":"#)
            out.appendJSONBool(v)
        }
        if let v = self.tempConvTTL {
            out.appendJSONRaw(#","tempConvTTL":"#)
            out.appendJSONInt(v)
        }
        if let v = self.tempConvIds {
            out.appendJSONRaw(#","tempConvIds":"#)
            out.appendJSONStrings(v)
        }
        if let v = self.allowedPids {
            out.appendJSONRaw(#","allowedPids":"#)
            out.appendJSONStrings(v)
        }
        if let v = self.failedPids {
            out.appendJSONRaw(#","failedPids":"#)
            out.appendJSONArray(v) { $0.writeJSON(into: &$1) }
        }
        if let v = self.sessionPeerIds {
            out.appendJSONRaw(#","sessionPeerIds":"#)
            out.appendJSONStrings(v)
        }
        if let v = self.onlineSessionPeerIds {
            out.appendJSONRaw(#","onlineSessionPeerIds":"#)
            out.appendJSONStrings(v)
        }
        if let v = self.maxReadTimestamp {
            out.appendJSONRaw(#","maxReadTimestamp":"#)
            out.appendJSONInt(v)
        }
        if let v = self.maxAckTimestamp {
            out.appendJSONRaw(#","maxAckTimestamp":"#)
            out.appendJSONInt(v)
        }
        writeMemberControlJSON(into: &out)
        if let v = self.binaryMsg {
            out.appendJSONRaw(#","binaryMsg":"#)
            out.appendJSONString(v)
        }
        if let v = self.patchTimestamp {
            out.appendJSONRaw(#","patchTimestamp":"#)
            out.appendJSONInt(v)
        }
        writeSDKFieldsJSON(into: &out)
        out.append(.closeBrace)
    }

    /// The fields LeanCloud's SDKs send besides (`flag` … `lastPatchTime`), in declaration order.
    fileprivate func writeSDKFieldsJSON(into out: inout JSONOutput) {
        if let v = self.flag {
            out.appendJSONRaw(#","flag":"#)
            out.appendJSONInt(v)
        }
        if let v = self.will {
            out.appendJSONRaw(#","will":"#)
            out.appendJSONBool(v)
        }
        if let v = self.tIncluded {
            out.appendJSONRaw(#","tIncluded":"#)
            out.appendJSONBool(v)
        }
        if let v = self.ttIncluded {
            out.appendJSONRaw(#","ttIncluded":"#)
            out.appendJSONBool(v)
        }
        if let v = self.lctype {
            out.appendJSONRaw(#","lctype":"#)
            out.appendJSONInt(v)
        }
        if let v = self.queryAllMembers {
            out.appendJSONRaw(#","queryAllMembers":"#)
            out.appendJSONBool(v)
        }
        if let v = self.maxReadTuples {
            out.appendJSONRaw(#","maxReadTuples":"#)
            out.appendJSONArray(v) { $0.writeJSON(into: &$1) }
        }
        if let v = self.lastPatchTime {
            out.appendJSONRaw(#","lastPatchTime":"#)
            out.appendJSONInt(v)
        }
        if let v = self.deviceToken {
            out.appendJSONRaw(#","deviceToken":"#)
            out.appendJSONString(v)
        }
        if let v = self.device {
            out.appendJSONRaw(#","device":"#)
            out.appendJSONValue(v)
        }
        if let v = self.devices {
            out.appendJSONRaw(#","devices":"#)
            out.appendJSONValue(v)
        }
        if let v = self.pushData {
            out.appendJSONRaw(#","pushData":"#)
            out.appendJSONString(v)
        }
    }
}

extension MaxReadTuple {
    static let jsonKeys = JSONKeyTable(["pid", "maxAckTimestamp", "maxReadTimestamp"])

    /// Decodes one element of an array of these (an object; anything else is invalid).
    static func decodeJSON(_ reader: inout JSONReader) throws(JSONSyntaxError) -> JSONDecoded<MaxReadTuple> {
        guard reader.peek() == .openBrace else {
            try reader.skipValue()
            return .invalid(.here)
        }
        var pid: String?
        var value = MaxReadTuple(pid: "")
        var errors = JSONFieldErrors()
        if try reader.beginObject() {
            repeat {
                switch try reader.readKeyIndex(in: jsonKeys) {
                case 0: pid = errors.take(requiredValue(try reader.decodeString()), 0)
                case 1: value.maxAckTimestamp = errors.take(try reader.decodeInt64(), 1)
                case 2: value.maxReadTimestamp = errors.take(try reader.decodeInt64(), 2)
                default: try reader.skipValue()
                }
            } while try reader.nextMember()
        }
        if let failure = errors.first(in: jsonKeys) { return .invalid(failure) }
        guard let pid else { return .invalid(.missing("pid")) }
        value.pid = pid
        return .value(value)
    }

    func writeJSON(into out: inout JSONOutput) {
        out.appendJSONRaw(#"{"pid":"#)
        out.appendJSONString(pid)
        if let v = maxAckTimestamp {
            out.appendJSONRaw(#","maxAckTimestamp":"#)
            out.appendJSONInt(v)
        }
        if let v = maxReadTimestamp {
            out.appendJSONRaw(#","maxReadTimestamp":"#)
            out.appendJSONInt(v)
        }
        out.append(.closeBrace)
    }
}

extension ConversationInfo {
    static let jsonKeys = JSONKeyTable([
        "objectId", "name", "m", "c", "tr", "unique", "attr", "mu", "lm", "createdAt", "updatedAt", "ttl", "memberInfo",
    ])

    /// Decodes one element of an array of these (an object; anything else is invalid).
    static func decodeJSON(_ reader: inout JSONReader) throws(JSONSyntaxError) -> JSONDecoded<ConversationInfo> {
        guard reader.peek() == .openBrace else {
            try reader.skipValue()
            return .invalid(.here)
        }
        var objectId: String?
        var value = ConversationInfo(objectId: "")
        var errors = JSONFieldErrors()
        if try reader.beginObject() {
            repeat {
                switch try reader.readKeyIndex(in: jsonKeys) {
                case 0: objectId = errors.take(requiredValue(try reader.decodeString()), 0)
                case 1: value.name = errors.take(try reader.decodeString(), 1)
                case 2: value.m = errors.take(try reader.decodeStrings(), 2)
                case 3: value.c = errors.take(try reader.decodeString(), 3)
                case 4: value.tr = errors.take(try reader.decodeBool(), 4)
                case 5: value.unique = errors.take(try reader.decodeBool(), 5)
                case 6: value.attr = errors.take(try reader.decodeAny(), 6)
                case 7: value.mu = errors.take(try reader.decodeStrings(), 7)
                case 8: value.lm = errors.take(try reader.decodeInt64(), 8)
                case 9: value.createdAt = errors.take(try reader.decodeInt64(), 9)
                case 10: value.updatedAt = errors.take(try reader.decodeInt64(), 10)
                case 11: value.ttl = errors.take(try reader.decodeInt(), 11)
                case 12: value.memberInfo = errors.take(try reader.decodeAny(), 12)
                default: try reader.skipValue()
                }
            } while try reader.nextMember()
        }
        if let failure = errors.first(in: jsonKeys) { return .invalid(failure) }
        guard let objectId else { return .invalid(.missing("objectId")) }
        value.objectId = objectId
        return .value(value)
    }

    func writeJSON(into out: inout JSONOutput) {
        out.appendJSONRaw(#"{"objectId":"#)
        out.appendJSONString(objectId)
        if let v = name {
            out.appendJSONRaw(#","name":"#)
            out.appendJSONString(v)
        }
        if let v = m {
            out.appendJSONRaw(#","m":"#)
            out.appendJSONStrings(v)
        }
        if let v = c {
            out.appendJSONRaw(#","c":"#)
            out.appendJSONString(v)
        }
        if let v = tr {
            out.appendJSONRaw(#","tr":"#)
            out.appendJSONBool(v)
        }
        if let v = unique {
            out.appendJSONRaw(#","unique":"#)
            out.appendJSONBool(v)
        }
        if let v = attr {
            out.appendJSONRaw(#","attr":"#)
            out.appendJSONValue(v)
        }
        if let v = mu {
            out.appendJSONRaw(#","mu":"#)
            out.appendJSONStrings(v)
        }
        if let v = lm {
            out.appendJSONRaw(#","lm":"#)
            out.appendJSONInt(v)
        }
        if let v = createdAt {
            out.appendJSONRaw(#","createdAt":"#)
            out.appendJSONInt(v)
        }
        if let v = updatedAt {
            out.appendJSONRaw(#","updatedAt":"#)
            out.appendJSONInt(v)
        }
        if let v = ttl {
            out.appendJSONRaw(#","ttl":"#)
            out.appendJSONInt(v)
        }
        if let v = memberInfo {
            out.appendJSONRaw(#","memberInfo":"#)
            out.appendJSONValue(v)
        }
        out.append(.closeBrace)
    }
}

extension FailedPids {
    static let jsonKeys = JSONKeyTable(["pids", "code", "reason", "detail"])

    /// Decodes one element of an array of these (an object; anything else is invalid).
    static func decodeJSON(_ reader: inout JSONReader) throws(JSONSyntaxError) -> JSONDecoded<FailedPids> {
        guard reader.peek() == .openBrace else {
            try reader.skipValue()
            return .invalid(.here)
        }
        var pids: [String]?
        var code: Int?
        var reason: String?
        var detail: String?
        var errors = JSONFieldErrors()
        if try reader.beginObject() {
            repeat {
                switch try reader.readKeyIndex(in: jsonKeys) {
                case 0: pids = errors.take(requiredValue(try reader.decodeStrings()), 0)
                case 1: code = errors.take(requiredValue(try reader.decodeInt()), 1)
                case 2: reason = errors.take(requiredValue(try reader.decodeString()), 2)
                case 3: detail = errors.take(try reader.decodeString(), 3)
                default: try reader.skipValue()
                }
            } while try reader.nextMember()
        }
        if let failure = errors.first(in: jsonKeys) { return .invalid(failure) }
        guard let pids else { return .invalid(.missing("pids")) }
        guard let code else { return .invalid(.missing("code")) }
        guard let reason else { return .invalid(.missing("reason")) }
        var value = FailedPids(pids: pids, error: IMError(code: code, reason: reason))
        value.detail = detail
        return .value(value)
    }

    func writeJSON(into out: inout JSONOutput) {
        out.appendJSONRaw(#"{"pids":"#)
        out.appendJSONStrings(pids)
        out.appendJSONRaw(#","code":"#)
        out.appendJSONInt(code)
        out.appendJSONRaw(#","reason":"#)
        out.appendJSONString(reason)
        if let v = detail {
            out.appendJSONRaw(#","detail":"#)
            out.appendJSONString(v)
        }
        out.append(.closeBrace)
    }
}

extension LogItem {
    static let jsonKeys = JSONKeyTable([
        "msgId", "from", "data", "timestamp", "ackAt", "readAt", "recalled", "priority", "mentionPids", "mentionAll",
        "bin", "patchTimestamp",
    ])

    /// Decodes one element of an array of these (an object; anything else is invalid).
    static func decodeJSON(_ reader: inout JSONReader) throws(JSONSyntaxError) -> JSONDecoded<LogItem> {
        guard reader.peek() == .openBrace else {
            try reader.skipValue()
            return .invalid(.here)
        }
        var msgId: String?
        var from: String?
        var data: String?
        var timestamp: Int64?
        var value = LogItem(msgId: "", from: "", data: "", timestamp: 0)
        var errors = JSONFieldErrors()
        if try reader.beginObject() {
            repeat {
                switch try reader.readKeyIndex(in: jsonKeys) {
                case 0: msgId = errors.take(requiredValue(try reader.decodeString()), 0)
                case 1: from = errors.take(requiredValue(try reader.decodeString()), 1)
                case 2: data = errors.take(requiredValue(try reader.decodeString()), 2)
                case 3: timestamp = errors.take(requiredValue(try reader.decodeInt64()), 3)
                case 4: value.ackAt = errors.take(try reader.decodeInt64(), 4)
                case 5: value.readAt = errors.take(try reader.decodeInt64(), 5)
                case 6: value.recalled = errors.take(try reader.decodeBool(), 6)
                case 7: value.priority = errors.take(try reader.decodeString(), 7)
                case 8: value.mentionPids = errors.take(try reader.decodeStrings(), 8)
                case 9: value.mentionAll = errors.take(try reader.decodeBool(), 9)
                case 10: value.bin = errors.take(try reader.decodeBool(), 10)
                case 11: value.patchTimestamp = errors.take(try reader.decodeInt64(), 11)
                default: try reader.skipValue()
                }
            } while try reader.nextMember()
        }
        if let failure = errors.first(in: jsonKeys) { return .invalid(failure) }
        guard let msgId else { return .invalid(.missing("msgId")) }
        value.msgId = msgId
        guard let from else { return .invalid(.missing("from")) }
        value.from = from
        guard let data else { return .invalid(.missing("data")) }
        value.data = data
        guard let timestamp else { return .invalid(.missing("timestamp")) }
        value.timestamp = timestamp
        return .value(value)
    }

    func writeJSON(into out: inout JSONOutput) {
        out.appendJSONRaw(#"{"msgId":"#)
        out.appendJSONString(msgId)
        out.appendJSONRaw(#","from":"#)
        out.appendJSONString(from)
        out.appendJSONRaw(#","data":"#)
        out.appendJSONString(data)
        out.appendJSONRaw(#","timestamp":"#)
        out.appendJSONInt(timestamp)
        if let v = ackAt {
            out.appendJSONRaw(#","ackAt":"#)
            out.appendJSONInt(v)
        }
        if let v = readAt {
            out.appendJSONRaw(#","readAt":"#)
            out.appendJSONInt(v)
        }
        if let v = recalled {
            out.appendJSONRaw(#","recalled":"#)
            out.appendJSONBool(v)
        }
        if let v = priority {
            out.appendJSONRaw(#","priority":"#)
            out.appendJSONString(v)
        }
        if let v = mentionPids {
            out.appendJSONRaw(#","mentionPids":"#)
            out.appendJSONStrings(v)
        }
        if let v = mentionAll {
            out.appendJSONRaw(#","mentionAll":"#)
            out.appendJSONBool(v)
        }
        if let v = bin {
            out.appendJSONRaw(#","bin":"#)
            out.appendJSONBool(v)
        }
        if let v = patchTimestamp {
            out.appendJSONRaw(#","patchTimestamp":"#)
            out.appendJSONInt(v)
        }
        out.append(.closeBrace)
    }
}

extension UnreadInfo {
    static let jsonKeys = JSONKeyTable(["cid", "unread", "mid", "timestamp", "from", "data", "mentioned", "binaryMsg", "patchTimestamp"])

    /// Decodes one element of an array of these (an object; anything else is invalid).
    static func decodeJSON(_ reader: inout JSONReader) throws(JSONSyntaxError) -> JSONDecoded<UnreadInfo> {
        guard reader.peek() == .openBrace else {
            try reader.skipValue()
            return .invalid(.here)
        }
        var cid: String?
        var unread: Int?
        var value = UnreadInfo(cid: "", unread: 0)
        var errors = JSONFieldErrors()
        if try reader.beginObject() {
            repeat {
                switch try reader.readKeyIndex(in: jsonKeys) {
                case 0: cid = errors.take(requiredValue(try reader.decodeString()), 0)
                case 1: unread = errors.take(requiredValue(try reader.decodeInt()), 1)
                case 2: value.mid = errors.take(try reader.decodeString(), 2)
                case 3: value.timestamp = errors.take(try reader.decodeInt64(), 3)
                case 4: value.from = errors.take(try reader.decodeString(), 4)
                case 5: value.data = errors.take(try reader.decodeString(), 5)
                case 6: value.mentioned = errors.take(try reader.decodeBool(), 6)
                case 7: value.binaryMsg = errors.take(try reader.decodeString(), 7)
                case 8: value.patchTimestamp = errors.take(try reader.decodeInt64(), 8)
                default: try reader.skipValue()
                }
            } while try reader.nextMember()
        }
        if let failure = errors.first(in: jsonKeys) { return .invalid(failure) }
        guard let cid else { return .invalid(.missing("cid")) }
        value.cid = cid
        guard let unread else { return .invalid(.missing("unread")) }
        value.unread = unread
        return .value(value)
    }

    func writeJSON(into out: inout JSONOutput) {
        out.appendJSONRaw(#"{"cid":"#)
        out.appendJSONString(cid)
        out.appendJSONRaw(#","unread":"#)
        out.appendJSONInt(unread)
        if let v = mid {
            out.appendJSONRaw(#","mid":"#)
            out.appendJSONString(v)
        }
        if let v = timestamp {
            out.appendJSONRaw(#","timestamp":"#)
            out.appendJSONInt(v)
        }
        if let v = from {
            out.appendJSONRaw(#","from":"#)
            out.appendJSONString(v)
        }
        if let v = data {
            out.appendJSONRaw(#","data":"#)
            out.appendJSONString(v)
        }
        if let v = mentioned {
            out.appendJSONRaw(#","mentioned":"#)
            out.appendJSONBool(v)
        }
        if let v = binaryMsg {
            out.appendJSONRaw(#","binaryMsg":"#)
            out.appendJSONString(v)
        }
        if let v = patchTimestamp {
            out.appendJSONRaw(#","patchTimestamp":"#)
            out.appendJSONInt(v)
        }
        out.append(.closeBrace)
    }
}

extension PatchItem {
    static let jsonKeys = JSONKeyTable([
        "cid", "mid", "timestamp", "recall", "data", "from", "patchTimestamp", "binaryMsg", "mentionPids", "mentionAll",
        "patchCode", "patchReason",
    ])

    /// Decodes one element of an array of these (an object; anything else is invalid).
    static func decodeJSON(_ reader: inout JSONReader) throws(JSONSyntaxError) -> JSONDecoded<PatchItem> {
        guard reader.peek() == .openBrace else {
            try reader.skipValue()
            return .invalid(.here)
        }
        var cid: String?
        var mid: String?
        var timestamp: Int64?
        var value = PatchItem(cid: "", mid: "", timestamp: 0)
        var errors = JSONFieldErrors()
        if try reader.beginObject() {
            repeat {
                switch try reader.readKeyIndex(in: jsonKeys) {
                case 0: cid = errors.take(requiredValue(try reader.decodeString()), 0)
                case 1: mid = errors.take(requiredValue(try reader.decodeString()), 1)
                case 2: timestamp = errors.take(requiredValue(try reader.decodeInt64()), 2)
                case 3: value.recall = errors.take(try reader.decodeBool(), 3)
                case 4: value.data = errors.take(try reader.decodeString(), 4)
                case 5: value.from = errors.take(try reader.decodeString(), 5)
                case 6: value.patchTimestamp = errors.take(try reader.decodeInt64(), 6)
                case 7: value.binaryMsg = errors.take(try reader.decodeString(), 7)
                case 8: value.mentionPids = errors.take(try reader.decodeStrings(), 8)
                case 9: value.mentionAll = errors.take(try reader.decodeBool(), 9)
                case 10: value.patchCode = errors.take(try reader.decodeInt(), 10)
                case 11: value.patchReason = errors.take(try reader.decodeString(), 11)
                default: try reader.skipValue()
                }
            } while try reader.nextMember()
        }
        if let failure = errors.first(in: jsonKeys) { return .invalid(failure) }
        guard let cid else { return .invalid(.missing("cid")) }
        value.cid = cid
        guard let mid else { return .invalid(.missing("mid")) }
        value.mid = mid
        guard let timestamp else { return .invalid(.missing("timestamp")) }
        value.timestamp = timestamp
        return .value(value)
    }

    func writeJSON(into out: inout JSONOutput) {
        out.appendJSONRaw(#"{"cid":"#)
        out.appendJSONString(cid)
        out.appendJSONRaw(#","mid":"#)
        out.appendJSONString(mid)
        out.appendJSONRaw(#","timestamp":"#)
        out.appendJSONInt(timestamp)
        if let v = recall {
            out.appendJSONRaw(#","recall":"#)
            out.appendJSONBool(v)
        }
        if let v = data {
            out.appendJSONRaw(#","data":"#)
            out.appendJSONString(v)
        }
        if let v = from {
            out.appendJSONRaw(#","from":"#)
            out.appendJSONString(v)
        }
        if let v = patchTimestamp {
            out.appendJSONRaw(#","patchTimestamp":"#)
            out.appendJSONInt(v)
        }
        if let v = binaryMsg {
            out.appendJSONRaw(#","binaryMsg":"#)
            out.appendJSONString(v)
        }
        if let v = mentionPids {
            out.appendJSONRaw(#","mentionPids":"#)
            out.appendJSONStrings(v)
        }
        if let v = mentionAll {
            out.appendJSONRaw(#","mentionAll":"#)
            out.appendJSONBool(v)
        }
        if let v = patchCode {
            out.appendJSONRaw(#","patchCode":"#)
            out.appendJSONInt(v)
        }
        if let v = patchReason {
            out.appendJSONRaw(#","patchReason":"#)
            out.appendJSONString(v)
        }
        out.append(.closeBrace)
    }
}

extension Command {
    /// The fields of member mutes, block lists and roles (`jsonKeys` 72–79).
    fileprivate func writeMemberControlJSON(into out: inout JSONOutput) {
        if let v = self.next {
            out.appendJSONRaw(#","next":"#)
            out.appendJSONString(v)
        }
        if let v = self.srcCid {
            out.appendJSONRaw(#","srcCid":"#)
            out.appendJSONString(v)
        }
        if let v = self.toPids {
            out.appendJSONRaw(#","toPids":"#)
            out.appendJSONStrings(v)
        }
        if let v = self.blockedPids {
            out.appendJSONRaw(#","blockedPids":"#)
            out.appendJSONStrings(v)
        }
        if let v = self.duration {
            out.appendJSONRaw(#","duration":"#)
            out.appendJSONInt(v)
        }
        if let v = self.all {
            out.appendJSONRaw(#","all":"#)
            out.appendJSONBool(v)
        }
        if let v = self.targetClientId {
            out.appendJSONRaw(#","targetClientId":"#)
            out.appendJSONString(v)
        }
        if let v = self.role {
            out.appendJSONRaw(#","role":"#)
            out.appendJSONString(v)
        }
    }
}
