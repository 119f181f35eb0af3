// Decoding reads only the keys a frame contains: a command sets a handful of its many optional
// fields, and looking each absent one up costs more than the decoding itself.
extension Command {
    enum CodingKeys: String, CodingKey {
        case cmd, op, i, peerId, appId, serverTs, code, reason, detail, appCode, tag, deviceId, r, t, n, s, st, stTtl, ua, cid, msg, id,
            fromPeerId, timestamp, transient, offline, hasMore, dt, priority, mentionPids, mentionAll, action, ext, uid, mid, ids, read,
            from, m, unique, name, attr, `where`, limit, skip, sort, c, initBy, results, count, lm, mu, cdate, udate, tt, tmid, logs,
            reversed, convs, patches, verdict, silent, kind
        case tempConv, tempConvTTL, tempConvIds, allowedPids, failedPids, sessionPeerIds, onlineSessionPeerIds
        case maxReadTimestamp, maxAckTimestamp
        case next, srcCid, toPids, blockedPids, duration, all, targetClientId, role
        case binaryMsg, patchTimestamp
        case flag, will, tIncluded, ttIncluded, lctype, queryAllMembers, maxReadTuples, lastPatchTime
        case deviceToken, device, devices, pushData
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(cmd: try container.decode(CommandType.self, forKey: .cmd))
        for key in container.allKeys {
            switch key {
            case .cmd: continue
            case .op: op = try container.decodeIfPresent(OpType.self, forKey: .op)
            case .i: i = try container.decodeIfPresent(Int.self, forKey: .i)
            case .peerId: peerId = try container.decodeIfPresent(String.self, forKey: .peerId)
            case .appId: appId = try container.decodeIfPresent(String.self, forKey: .appId)
            case .serverTs: serverTs = try container.decodeIfPresent(Int64.self, forKey: .serverTs)
            case .code: code = try container.decodeIfPresent(Int.self, forKey: .code)
            case .reason: reason = try container.decodeIfPresent(String.self, forKey: .reason)
            case .detail: detail = try container.decodeIfPresent(String.self, forKey: .detail)
            case .appCode: appCode = try container.decodeIfPresent(Int.self, forKey: .appCode)
            case .tag: tag = try container.decodeIfPresent(String.self, forKey: .tag)
            case .deviceId: deviceId = try container.decodeIfPresent(String.self, forKey: .deviceId)
            case .r: r = try container.decodeIfPresent(Bool.self, forKey: .r)
            case .t: t = try container.decodeIfPresent(Int64.self, forKey: .t)
            case .n: n = try container.decodeIfPresent(String.self, forKey: .n)
            case .s: s = try container.decodeIfPresent(String.self, forKey: .s)
            case .st: st = try container.decodeIfPresent(String.self, forKey: .st)
            case .stTtl: stTtl = try container.decodeIfPresent(Int.self, forKey: .stTtl)
            case .ua: ua = try container.decodeIfPresent(String.self, forKey: .ua)
            case .cid: cid = try container.decodeIfPresent(String.self, forKey: .cid)
            case .msg: msg = try container.decodeIfPresent(String.self, forKey: .msg)
            case .id: id = try container.decodeIfPresent(String.self, forKey: .id)
            case .fromPeerId: fromPeerId = try container.decodeIfPresent(String.self, forKey: .fromPeerId)
            case .timestamp: timestamp = try container.decodeIfPresent(Int64.self, forKey: .timestamp)
            case .transient: transient = try container.decodeIfPresent(Bool.self, forKey: .transient)
            case .offline: offline = try container.decodeIfPresent(Bool.self, forKey: .offline)
            case .hasMore: hasMore = try container.decodeIfPresent(Bool.self, forKey: .hasMore)
            case .dt: dt = try container.decodeIfPresent(String.self, forKey: .dt)
            case .priority: priority = try container.decodeIfPresent(String.self, forKey: .priority)
            case .mentionPids: mentionPids = try container.decodeIfPresent([String].self, forKey: .mentionPids)
            case .mentionAll: mentionAll = try container.decodeIfPresent(Bool.self, forKey: .mentionAll)
            case .action: action = try container.decodeIfPresent(String.self, forKey: .action)
            case .ext: ext = try container.decodeIfPresent([String: JSONValue].self, forKey: .ext)
            case .uid: uid = try container.decodeIfPresent(String.self, forKey: .uid)
            case .mid: mid = try container.decodeIfPresent(String.self, forKey: .mid)
            case .ids: ids = try container.decodeIfPresent([String].self, forKey: .ids)
            case .read: read = try container.decodeIfPresent(Bool.self, forKey: .read)
            case .from: from = try container.decodeIfPresent(String.self, forKey: .from)
            case .m: m = try container.decodeIfPresent([String].self, forKey: .m)
            case .unique: unique = try container.decodeIfPresent(Bool.self, forKey: .unique)
            case .name: name = try container.decodeIfPresent(String.self, forKey: .name)
            case .attr: attr = try container.decodeIfPresent(JSONValue.self, forKey: .attr)
            case .`where`: `where` = try container.decodeIfPresent(JSONValue.self, forKey: .`where`)
            case .limit: limit = try container.decodeIfPresent(Int.self, forKey: .limit)
            case .skip: skip = try container.decodeIfPresent(Int.self, forKey: .skip)
            case .sort: sort = try container.decodeIfPresent(String.self, forKey: .sort)
            case .c: c = try container.decodeIfPresent(String.self, forKey: .c)
            case .initBy: initBy = try container.decodeIfPresent(String.self, forKey: .initBy)
            case .results: results = try container.decodeIfPresent([ConversationInfo].self, forKey: .results)
            case .count: count = try container.decodeIfPresent(Int.self, forKey: .count)
            case .lm: lm = try container.decodeIfPresent(Int64.self, forKey: .lm)
            case .mu: mu = try container.decodeIfPresent([String].self, forKey: .mu)
            case .cdate: cdate = try container.decodeIfPresent(Int64.self, forKey: .cdate)
            case .udate: udate = try container.decodeIfPresent(Int64.self, forKey: .udate)
            case .tt: tt = try container.decodeIfPresent(Int64.self, forKey: .tt)
            case .tmid: tmid = try container.decodeIfPresent(String.self, forKey: .tmid)
            case .logs: logs = try container.decodeIfPresent([LogItem].self, forKey: .logs)
            case .reversed: reversed = try container.decodeIfPresent(Bool.self, forKey: .reversed)
            case .convs: convs = try container.decodeIfPresent([UnreadInfo].self, forKey: .convs)
            case .patches: patches = try container.decodeIfPresent([PatchItem].self, forKey: .patches)
            case .verdict: verdict = try container.decodeIfPresent(String.self, forKey: .verdict)
            case .silent: silent = try container.decodeIfPresent(Bool.self, forKey: .silent)
            case .kind: kind = try container.decodeIfPresent(String.self, forKey: .kind)
            case .tempConv: tempConv = try container.decodeIfPresent(Bool.self, forKey: .tempConv)
            case .tempConvTTL: tempConvTTL = try container.decodeIfPresent(Int.self, forKey: .tempConvTTL)
            case .tempConvIds: tempConvIds = try container.decodeIfPresent([String].self, forKey: .tempConvIds)
            case .allowedPids: allowedPids = try container.decodeIfPresent([String].self, forKey: .allowedPids)
            case .failedPids: failedPids = try container.decodeIfPresent([FailedPids].self, forKey: .failedPids)
            case .sessionPeerIds: sessionPeerIds = try container.decodeIfPresent([String].self, forKey: .sessionPeerIds)
            case .onlineSessionPeerIds:
                onlineSessionPeerIds = try container.decodeIfPresent([String].self, forKey: .onlineSessionPeerIds)
            case .maxReadTimestamp: maxReadTimestamp = try container.decodeIfPresent(Int64.self, forKey: .maxReadTimestamp)
            case .maxAckTimestamp: maxAckTimestamp = try container.decodeIfPresent(Int64.self, forKey: .maxAckTimestamp)
            case .next: next = try container.decodeIfPresent(String.self, forKey: .next)
            case .srcCid: srcCid = try container.decodeIfPresent(String.self, forKey: .srcCid)
            case .toPids: toPids = try container.decodeIfPresent([String].self, forKey: .toPids)
            case .blockedPids: blockedPids = try container.decodeIfPresent([String].self, forKey: .blockedPids)
            case .duration: duration = try container.decodeIfPresent(Int.self, forKey: .duration)
            case .all: all = try container.decodeIfPresent(Bool.self, forKey: .all)
            case .targetClientId: targetClientId = try container.decodeIfPresent(String.self, forKey: .targetClientId)
            case .role: role = try container.decodeIfPresent(String.self, forKey: .role)
            case .binaryMsg: binaryMsg = try container.decodeIfPresent(String.self, forKey: .binaryMsg)
            case .patchTimestamp: patchTimestamp = try container.decodeIfPresent(Int64.self, forKey: .patchTimestamp)
            case .flag: flag = try container.decodeIfPresent(Int.self, forKey: .flag)
            case .will: will = try container.decodeIfPresent(Bool.self, forKey: .will)
            case .tIncluded: tIncluded = try container.decodeIfPresent(Bool.self, forKey: .tIncluded)
            case .ttIncluded: ttIncluded = try container.decodeIfPresent(Bool.self, forKey: .ttIncluded)
            case .lctype: lctype = try container.decodeIfPresent(Int.self, forKey: .lctype)
            case .queryAllMembers: queryAllMembers = try container.decodeIfPresent(Bool.self, forKey: .queryAllMembers)
            case .maxReadTuples: maxReadTuples = try container.decodeIfPresent([MaxReadTuple].self, forKey: .maxReadTuples)
            case .lastPatchTime: lastPatchTime = try container.decodeIfPresent(Int64.self, forKey: .lastPatchTime)
            case .deviceToken: deviceToken = try container.decodeIfPresent(String.self, forKey: .deviceToken)
            case .device: device = try container.decodeIfPresent(JSONValue.self, forKey: .device)
            case .devices: devices = try container.decodeIfPresent(JSONValue.self, forKey: .devices)
            case .pushData:
                let value = try container.decodeIfPresent(JSONValue.self, forKey: .pushData)
                if let value, value != .null, value.stringValue == nil, value.objectValue == nil {
                    throw DecodingError.dataCorruptedError(
                        forKey: .pushData, in: container, debugDescription: "pushData is a JSON object or its text")
                }
                pushData = value.flatMap { $0 == .null ? nil : ($0.stringValue ?? $0.jsonString()) }
            }
        }
    }
}
