import FuzzSupport
import IMCore

/// libFuzzer target: any bytes given to the JSON command decoder are decoded or refused with an error,
/// never a crash; a decoded command encodes to JSON that decodes to the same command.
func fuzzJSONCommand(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let codec = JSONCommandCodec()
    guard let command = try? codec.decode(bytes: UnsafeRawBufferPointer(start: data, count: size)) else { return 0 }
    let text = codec.encode(command)
    guard let again = try? codec.decode(text) else { fatalError("the encoding of a decoded command does not decode: \(text)") }
    precondition(again == command, "a decoded command changed through encoding: \(text)")
    return 0
}

@main
struct FuzzJSONCommand {
    static func main() throws { try fuzzMain(fuzzJSONCommand) }
}
