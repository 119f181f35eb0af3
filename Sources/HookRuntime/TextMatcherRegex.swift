import CPCRE2

/// One compiled regular expression of a matcher (PCRE2, JIT-compiled where the platform has it), matched under
/// hard limits: at most `TextMatcherLimits.regexMatchSteps` backtracking steps, `regexDepth` nested
/// backtracking frames and `regexHeapKiB` of heap per call, so a pattern that could backtrack catastrophically
/// gives up instead of stalling the plugin's thread.
final class BoundedRegex {
    enum Outcome {
        case match(Int, Int)
        case noMatch
        /// The match gave up at a limit; the message names which.
        case limit(String)
    }

    let pattern: String
    private let code: OpaquePointer
    private let matchData: OpaquePointer
    private let context: OpaquePointer
    /// Bytes of the compiled pattern, its JIT code and its match data.
    let bytes: Int

    init(_ pattern: String, limits: TextMatcherLimits) throws(TextMatcherError) {
        self.pattern = pattern
        guard pattern.utf8.count <= limits.maxRegexBytes else {
            throw TextMatcherError(
                "regex \(quoted(pattern)): longer than \(limits.maxRegexBytes) bytes (\(pattern.utf8.count))")
        }
        guard let compileContext = pcre2_compile_context_create_8(nil) else { throw TextMatcherError("regex: out of memory") }
        defer { pcre2_compile_context_free_8(compileContext) }
        pcre2_set_parens_nest_limit_8(compileContext, 32)
        var errorCode: Int32 = 0
        var errorOffset = 0
        let options = UInt32(PCRE2_UTF | PCRE2_CASELESS | PCRE2_NEVER_BACKSLASH_C)
        var source = pattern
        let compiled = source.withUTF8 { b in
            pcre2_compile_8(b.baseAddress, b.count, options, &errorCode, &errorOffset, compileContext)
        }
        guard let compiled else {
            throw TextMatcherError("regex \(quoted(pattern)): \(pcre2Message(errorCode)) at offset \(errorOffset)")
        }
        var minimum: UInt32 = 0
        pcre2_pattern_info_8(compiled, UInt32(PCRE2_INFO_MINLENGTH), &minimum)
        guard minimum > 0 else {
            pcre2_code_free_8(compiled)
            throw TextMatcherError("regex \(quoted(pattern)): matches the empty string (it would match every message)")
        }
        _ = pcre2_jit_compile_8(compiled, UInt32(PCRE2_JIT_COMPLETE)) // optional: the interpreter runs without it
        guard let data = pcre2_match_data_create_from_pattern_8(compiled, nil),
            let matchContext = pcre2_match_context_create_8(nil)
        else {
            pcre2_code_free_8(compiled)
            throw TextMatcherError("regex: out of memory")
        }
        pcre2_set_match_limit_8(matchContext, limits.regexMatchSteps)
        pcre2_set_depth_limit_8(matchContext, limits.regexDepth)
        pcre2_set_heap_limit_8(matchContext, limits.regexHeapKiB)
        code = compiled
        matchData = data
        context = matchContext
        var size = 0
        var jitSize = 0
        pcre2_pattern_info_8(compiled, UInt32(PCRE2_INFO_SIZE), &size)
        pcre2_pattern_info_8(compiled, UInt32(PCRE2_INFO_JITSIZE), &jitSize)
        var captures: UInt32 = 0
        pcre2_pattern_info_8(compiled, UInt32(PCRE2_INFO_CAPTURECOUNT), &captures)
        bytes = size + jitSize + 64 + Int(captures + 1) * 16 + pattern.utf8.count
    }

    deinit {
        pcre2_match_data_free_8(matchData)
        pcre2_match_context_free_8(context)
        pcre2_code_free_8(code)
    }

    /// The first match at or after byte `start` of `subject` (valid UTF-8, checked by the caller).
    func match(_ subject: UnsafeBufferPointer<UInt8>, from start: Int) -> Outcome {
        let rc = pcre2_match_8(
            code, subject.baseAddress ?? UnsafePointer(bitPattern: 1), subject.count, start, UInt32(PCRE2_NO_UTF_CHECK),
            matchData, context)
        if rc >= 0 {
            let ovector = pcre2_get_ovector_pointer_8(matchData)!
            return .match(ovector[0], ovector[1])
        }
        switch rc {
        case PCRE2_ERROR_NOMATCH, PCRE2_ERROR_PARTIAL: return .noMatch
        case PCRE2_ERROR_MATCHLIMIT, PCRE2_ERROR_JIT_STACKLIMIT:
            return .limit("regex \(quoted(pattern)) gave up: it backtracked past its limit on this text (counted as no match)")
        case PCRE2_ERROR_DEPTHLIMIT, PCRE2_ERROR_HEAPLIMIT:
            return .limit("regex \(quoted(pattern)) gave up: it nested past its limit on this text (counted as no match)")
        default:
            return .limit("regex \(quoted(pattern)) failed: \(pcre2Message(rc)) (counted as no match)")
        }
    }
}

private func pcre2Message(_ code: Int32) -> String {
    var buffer = [UInt8](repeating: 0, count: 256)
    let n = buffer.withUnsafeMutableBufferPointer { pcre2_get_error_message_8(code, $0.baseAddress, $0.count) }
    return n > 0 ? String(decoding: buffer[0..<Int(n)], as: UTF8.self) : "error \(code)"
}

func quoted(_ s: String) -> String {
    let cut = s.count > 80 ? String(s.prefix(77)) + "..." : s
    return "\"" + cut + "\""
}
