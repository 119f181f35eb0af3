import IMCore

/// `blacklist` commands (block lists of conversations) in LeanCloud's `BlacklistCommand`.
extension ProtobufCommandCodec {
    static func blacklistMessage(_ c: Command) -> LCProtoBlacklistCommand {
        var b = LCProtoBlacklistCommand()
        if let v = c.srcCid { b.srcCid = v }
        if let v = c.toPids { b.toPids = v }
        if let v = c.limit { b.limit = Int32(clamping: v) }
        if let v = c.next { b.next = v }
        if let v = c.blockedPids { b.blockedPids = v }
        if let v = c.allowedPids { b.allowedPids = v }
        if let v = c.failedPids { b.failedPids = v.map(failureMessage) }
        if let v = c.t { b.t = v }
        if let v = c.n { b.n = v }
        if let v = c.s { b.s = v }
        return b
    }

    static func decodeBlacklist(_ b: LCProtoBlacklistCommand, into c: inout Command) {
        if b.hasSrcCid { c.srcCid = b.srcCid }
        if !b.toPids.isEmpty { c.toPids = b.toPids }
        if b.hasLimit { c.limit = Int(b.limit) }
        if b.hasNext { c.next = b.next }
        if !b.blockedPids.isEmpty { c.blockedPids = b.blockedPids }
        if !b.allowedPids.isEmpty { c.allowedPids = b.allowedPids }
        if !b.failedPids.isEmpty { c.failedPids = b.failedPids.map(failedPids) }
        if b.hasT { c.t = b.t }
        if b.hasN { c.n = b.n }
        if b.hasS { c.s = b.s }
    }

    /// One partial failure (the ids and why) as LeanCloud's `ErrorCommand`, in `failedPids` of conv and
    /// blacklist replies.
    static func failureMessage(_ failure: FailedPids) -> LCProtoErrorCommand {
        var error = LCProtoErrorCommand()
        error.pids = failure.pids
        error.code = Int32(clamping: failure.code)
        error.reason = failure.reason
        if let detail = failure.detail { error.detail = detail }
        return error
    }

    /// The partial failure an `ErrorCommand` of `failedPids` carries.
    static func failedPids(_ error: LCProtoErrorCommand) -> FailedPids {
        var failure = FailedPids(pids: error.pids, error: IMError(code: Int(error.code), reason: error.reason))
        if error.hasDetail { failure.detail = error.detail }
        return failure
    }
}
