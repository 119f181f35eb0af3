import Foundation

/// MD5 (RFC 1321) and SHA-256 (FIPS 180-4) written out from their specifications, as test oracles. Written by
/// hand on purpose: the server computes both with swift-crypto, so a test that used swift-crypto too would check
/// the server with itself; spawning `md5sum`/`sha256sum` instead crashed once inside Foundation's `Process.run`
/// while other tests ran. Slow and simple; for test inputs only.
public enum ReferenceDigest {
    /// The lowercase hex MD5 of `bytes`.
    public static func md5<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let shifts: [UInt32] = [
            7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
            4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
        ]
        let constants: [UInt32] = (0..<64).map { UInt32(truncatingIfNeeded: Int64(abs(sin(Double($0 + 1))) * 4_294_967_296)) }
        var state: [UInt32] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476]
        for block in padded(Array(bytes), lengthBigEndian: false) {
            let words = (0..<16).map { index in
                (0..<4).reduce(UInt32(0)) { $0 | UInt32(block[index * 4 + $1]) << (8 * UInt32($1)) }
            }
            var (a, b, c, d) = (state[0], state[1], state[2], state[3])
            for step in 0..<64 {
                var f: UInt32
                let g: Int
                switch step {
                case 0..<16: (f, g) = ((b & c) | (~b & d), step)
                case 16..<32: (f, g) = ((d & b) | (~d & c), (5 * step + 1) % 16)
                case 32..<48: (f, g) = (b ^ c ^ d, (3 * step + 5) % 16)
                default: (f, g) = (c ^ (b | ~d), (7 * step) % 16)
                }
                f = f &+ a &+ constants[step] &+ words[g]
                (a, d, c) = (d, c, b)
                b = b &+ rotateLeft(f, shifts[step])
            }
            state = [state[0] &+ a, state[1] &+ b, state[2] &+ c, state[3] &+ d]
        }
        return state.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (8 * UInt32($0))) } }.hex
    }

    /// The lowercase hex SHA-256 of `bytes`.
    public static func sha256<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let primes = (2...311).filter { candidate in !(2..<candidate).contains { candidate % $0 == 0 } }
        func fraction(_ value: Double) -> UInt32 { UInt32(truncatingIfNeeded: Int64((value - value.rounded(.down)) * 4_294_967_296)) }
        // The first 32 bits of the fractional parts of the primes' square roots (initial state) and cube roots
        // (round constants), as the standard defines them.
        var state = primes.prefix(8).map { fraction(Double($0).squareRoot()) }
        let constants = primes.prefix(64).map { fraction(cbrt(Double($0))) }
        func rotateRight(_ value: UInt32, _ count: UInt32) -> UInt32 { value >> count | value << (32 - count) }
        for block in padded(Array(bytes), lengthBigEndian: true) {
            var words = (0..<16).map { index in (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(block[index * 4 + $1]) } }
            for index in 16..<64 {
                let low = rotateRight(words[index - 15], 7) ^ rotateRight(words[index - 15], 18) ^ (words[index - 15] >> 3)
                let high = rotateRight(words[index - 2], 17) ^ rotateRight(words[index - 2], 19) ^ (words[index - 2] >> 10)
                words.append(words[index - 16] &+ low &+ words[index - 7] &+ high)
            }
            var work = state
            for index in 0..<64 {
                let (a, e) = (work[0], work[4])
                let sigmaE = rotateRight(e, 6) ^ rotateRight(e, 11) ^ rotateRight(e, 25)
                let choose = (e & work[5]) ^ (~e & work[6])
                let first = work[7] &+ sigmaE &+ choose &+ constants[index] &+ words[index]
                let sigmaA = rotateRight(a, 2) ^ rotateRight(a, 13) ^ rotateRight(a, 22)
                let majority = (a & work[1]) ^ (a & work[2]) ^ (work[1] & work[2])
                work = [first &+ sigmaA &+ majority, a, work[1], work[2], work[3] &+ first, work[4], work[5], work[6]]
            }
            state = zip(state, work).map { $0 &+ $1 }
        }
        return state.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * UInt32($0))) } }.hex
    }

    /// The message with its 0x80 byte, zeros and 64-bit bit length appended, cut into 64-byte blocks.
    private static func padded(_ message: [UInt8], lengthBigEndian: Bool) -> [[UInt8]] {
        var bytes = message
        let bitLength = UInt64(message.count) * 8
        bytes.append(0x80)
        while bytes.count % 64 != 56 { bytes.append(0) }
        let lengthBytes = (0..<8).map { UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64($0))) }
        bytes += lengthBigEndian ? lengthBytes.reversed() : lengthBytes
        return stride(from: 0, to: bytes.count, by: 64).map { Array(bytes[$0..<$0 + 64]) }
    }

    private static func rotateLeft(_ value: UInt32, _ count: UInt32) -> UInt32 { value << count | value >> (32 - count) }
}

extension [UInt8] {
    fileprivate var hex: String { map { String(format: "%02x", $0) }.joined() }
}
