import NIOCore

extension WireFormat {
    /// Whether a received frame's payload probably sends a message (a `direct` command), read from its first bytes
    /// before it is decoded: what `InterceptorHub.expectReview` is told on (issue 30, round 9). Decoding and handling
    /// the frame takes the event loop 20–30 µs more; this costs a comparison of a few bytes. A wrong guess costs
    /// little either way: a missed one only the head start, a false one (a transient or cmd message, an encoding
    /// with `cmd` elsewhere than first) a heads-up that no review follows, which the interceptor bounds.
    func probablySendsMessage(_ payload: ByteBuffer) -> Bool {
        let bytes = payload.readableBytesView
        switch self {
        case .json:
            // Hookbot's SDK and console write `cmd` first.
            return bytes.starts(with: Self.jsonDirect)
        case .protobuf:
            // `GenericCommand`'s field 1 (`cmd`, a varint) first, as protobuf encoders write fields in number order:
            // tag 0x08, then `direct` (2).
            return bytes.starts(with: Self.protobufDirect)
        case .protobufBase64:
            // The same two bytes in base64: "CA" and a third character whose top two bits are 0x02's low ones.
            guard bytes.count >= 3 else { return false }
            let third = bytes[bytes.startIndex + 2]
            return bytes.starts(with: Self.base64Direct) && (UInt8(ascii: "I")...UInt8(ascii: "L")).contains(third)
        case .local:
            return false
        }
    }

    private static let jsonDirect = Array(#"{"cmd":"direct""#.utf8)
    private static let protobufDirect: [UInt8] = [0x08, 0x02]
    private static let base64Direct = Array("CA".utf8)
}
