import Foundation
import IMCore
import IMProto
import NIOCore
import XCTest

@testable import IMServer

/// Naming a session in an already encoded protobuf frame gives the frame of the named command.
final class FrameNamingTests: XCTestCase {
    func testAppendedPeerIdDecodesLikeAnEncodedOne() throws {
        var direct = Command(cmd: .direct)
        direct.cid = "c1"
        direct.id = "m1"
        direct.msg = #"{"_lctype":-1,"_lctext":"hi"}"#
        direct.fromPeerId = "Tom"
        direct.timestamp = 1_763_700_000_000
        direct.mentionPids = ["Jerry"]
        let protobuf = ProtobufCommandCodec()
        // Short and long client ids (a length that needs a two-byte varint).
        for peer in ["Jerry", String(repeating: "猫", count: 64)] {
            var named = direct
            named.peerId = peer
            for format in [WireFormat.protobuf, .protobufBase64] {
                let codec = FrameCodec(format)
                let frame = try XCTUnwrap(FrameCodec.naming(codec.encode(direct), format: format, peerID: peer))
                let decoded: [Command]
                switch frame {
                case .binary(let buffer): decoded = try protobuf.decode(Array(buffer.readableBytesView))
                case .text(let text): decoded = try protobuf.decodeBase64(text)
                default: return XCTFail("unexpected frame \(frame)")
                }
                XCTAssertEqual(decoded, [named], "\(format) \(peer.utf8.count) bytes")
            }
        }
        XCTAssertNil(FrameCodec.naming(FrameCodec(.json).encode(direct), format: .json, peerID: "Jerry"))
    }
}
