import Foundation
import FuzzSupport
import IMCore
import IMProto

/// libFuzzer target: any bytes given to the LeanCloud protobuf decoder (binary and base64 frames) are
/// decoded or refused with an error, never a crash; decoded commands encode again without a crash.
func fuzzProtobufCommand(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let codec = ProtobufCommandCodec()
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for command in (try? codec.decode(bytes)) ?? [] {
        _ = try? codec.encode(command)
    }
    _ = try? codec.decodeBase64(String(decoding: bytes, as: UTF8.self))
    return 0
}

@main
struct FuzzProtobufCommand {
    static func main() throws { try fuzzMain(fuzzProtobufCommand) }
}
