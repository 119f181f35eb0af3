import Foundation

/// Reads the type, image size and duration of a stored file from its headers.
///
/// Hand-written on purpose: no Swift package in the project's mirror parses these containers, and only a
/// few header fields are needed. Every read is bounded (a few KiB at a time, a bounded number of boxes,
/// segments or chunks), so a hostile file costs at most a few hundred small reads.
public enum MediaSniffer {
    /// What the headers say.
    public struct Result: Sendable, Equatable {
        public var mime: String
        public var format: String?
        public var width: Int?
        public var height: Int?
        public var duration: Double?

        public init(mime: String, format: String? = nil, width: Int? = nil, height: Int? = nil, duration: Double? = nil) {
            self.mime = mime
            self.format = format
            self.width = width
            self.height = height
            self.duration = duration
        }
    }

    /// Reads up to `count` bytes at `offset` (fewer at the end of the file).
    public typealias Reader = (_ offset: Int64, _ count: Int) throws -> [UInt8]

    /// Sniffs the file at `path`.
    public static func sniff(path: String) throws -> Result {
        guard let handle = FileHandle(forReadingAtPath: path) else { return Result(mime: "application/octet-stream") }
        defer { try? handle.close() }
        let size = Int64(try handle.seekToEnd())
        return try sniff(size: size) { offset, count in
            guard offset >= 0, offset < size, count > 0 else { return [] }
            try handle.seek(toOffset: UInt64(offset))
            return [UInt8](try handle.read(upToCount: count) ?? Data())
        }
    }

    /// Sniffs bytes held in memory (tests, small buffers).
    public static func sniff(bytes: [UInt8]) -> Result {
        (try? sniff(size: Int64(bytes.count)) { offset, count in
            guard offset >= 0, offset < Int64(bytes.count), count > 0 else { return [] }
            let start = Int(offset)
            return Array(bytes[start..<min(bytes.count, start + count)])
        }) ?? Result(mime: "application/octet-stream")
    }

    public static func sniff(size: Int64, read: Reader) throws -> Result {
        let head = try read(0, 64)
        func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            head.count >= offset + magic.count && Array(head[offset..<offset + magic.count]) == magic
        }
        func ascii(_ text: String, at offset: Int = 0) -> Bool { starts(Array(text.utf8), at: offset) }

        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            var result = Result(mime: "image/png", format: "png")
            if head.count >= 24, ascii("IHDR", at: 12) {
                result.width = Int(be32(head, 16))
                result.height = Int(be32(head, 20))
            }
            return result
        }
        if ascii("GIF87a") || ascii("GIF89a") {
            var result = Result(mime: "image/gif", format: "gif")
            if head.count >= 10 {
                result.width = Int(le16(head, 6))
                result.height = Int(le16(head, 8))
            }
            return result
        }
        if starts([0xFF, 0xD8, 0xFF]) { return try jpeg(size: size, read: read) }
        if ascii("RIFF"), ascii("WEBP", at: 8) { return try webp(size: size, read: read) }
        if ascii("RIFF"), ascii("WAVE", at: 8) { return try wav(size: size, read: read) }
        if ascii("ftyp", at: 4) {
            return try mp4(size: size, read: read, brand: String(decoding: head[8..<min(12, head.count)], as: UTF8.self))
        }
        if ascii("OggS") { return try ogg(size: size, read: read) }
        if ascii("ID3") || (head.count >= 2 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0 && head[1] & 0x06 != 0) {
            if let result = try mp3(size: size, read: read) { return result }
        }
        if starts([0x1A, 0x45, 0xDF, 0xA3]) { return Result(mime: "video/webm", format: "webm") }
        if ascii("%PDF-") { return Result(mime: "application/pdf", format: "pdf") }
        if starts([0x50, 0x4B, 0x03, 0x04]) { return Result(mime: "application/zip", format: "zip") }
        if starts([0x7F, 0x45, 0x4C, 0x46]) { return Result(mime: "application/x-executable", format: "elf") }
        if ascii("MZ") { return Result(mime: "application/x-msdownload", format: "exe") }
        if ascii("BM"), head.count >= 26 {
            return Result(mime: "image/bmp", format: "bmp", width: Int(le32(head, 18)), height: abs(Int(Int32(bitPattern: le32(head, 22)))))
        }
        return Result(mime: "application/octet-stream")
    }

    // MARK: Images

    /// Walks the JPEG segments up to the first start-of-frame (SOF0–SOF15 but DHT, JPG and DAC).
    static func jpeg(size: Int64, read: Reader) throws -> Result {
        var result = Result(mime: "image/jpeg", format: "jpeg")
        var offset: Int64 = 2
        for _ in 0..<4096 {
            let header = try read(offset, 9)
            guard header.count >= 4, header[0] == 0xFF else { break }
            let marker = header[1]
            if marker == 0xFF { // fill byte
                offset += 1
                continue
            }
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) {
                offset += 2
                continue
            }
            if marker == 0xD9 || marker == 0xDA { break } // end, or the scan started without a frame header
            let length = Int64(be16(header, 2))
            guard length >= 2 else { break }
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker), header.count >= 9 {
                result.height = Int(be16(header, 5))
                result.width = Int(be16(header, 7))
                break
            }
            offset += 2 + length
        }
        return result
    }

    static func webp(size: Int64, read: Reader) throws -> Result {
        var result = Result(mime: "image/webp", format: "webp")
        let chunk = try read(12, 20)
        guard chunk.count >= 8 else { return result }
        switch String(decoding: chunk[0..<4], as: UTF8.self) {
        case "VP8 ": // lossy: frame tag (3), start code 9D 01 2A, then 14-bit width and height
            if chunk.count >= 18, chunk[11] == 0x9D, chunk[12] == 0x01, chunk[13] == 0x2A {
                result.width = Int(le16(chunk, 14) & 0x3FFF)
                result.height = Int(le16(chunk, 16) & 0x3FFF)
            }
        case "VP8L": // lossless: signature 2F, then 14 bits width-1, 14 bits height-1
            if chunk.count >= 13, chunk[8] == 0x2F {
                let bits = le32(chunk, 9)
                result.width = Int(bits & 0x3FFF) + 1
                result.height = Int((bits >> 14) & 0x3FFF) + 1
            }
        case "VP8X" where chunk.count >= 18: // extended: 24-bit canvas width-1 and height-1
            result.width = Int(le24(chunk, 12)) + 1
            result.height = Int(le24(chunk, 15)) + 1
        default: break
        }
        return result
    }

    // MARK: Audio and video

    /// WAV: the `fmt ` chunk's byte rate and the `data` chunk's size.
    static func wav(size: Int64, read: Reader) throws -> Result {
        var result = Result(mime: "audio/wav", format: "wav")
        var offset: Int64 = 12
        var byteRate: UInt32 = 0
        for _ in 0..<256 {
            let header = try read(offset, 16)
            guard header.count >= 8 else { break }
            let id = String(decoding: header[0..<4], as: UTF8.self)
            let length = Int64(le32(header, 4))
            if id == "fmt ", header.count >= 16 {
                let format = try read(offset + 8, 16)
                if format.count >= 12 { byteRate = le32(format, 8) }
            } else if id == "data" {
                let dataBytes = min(length, size - offset - 8)
                if byteRate > 0 { result.duration = Double(dataBytes) / Double(byteRate) }
                break
            }
            offset += 8 + length + (length & 1)
        }
        return result
    }

    /// MP4 / M4A / MOV: the `moov/mvhd` box's time scale and duration.
    static func mp4(size: Int64, read: Reader, brand: String) throws -> Result {
        let audio = brand.hasPrefix("M4A") || brand.hasPrefix("M4B")
        let quicktime = brand.hasPrefix("qt")
        var result = Result(
            mime: audio ? "audio/mp4" : quicktime ? "video/quicktime" : "video/mp4", format: audio ? "m4a" : quicktime ? "mov" : "mp4")
        guard let moov = try box("moov", from: 0, to: size, read: read),
            let mvhd = try box("mvhd", from: moov.lowerBound, to: moov.upperBound, read: read)
        else { return result }
        let body = try read(mvhd.lowerBound, 32)
        guard body.count >= 20 else { return result }
        let scale: UInt32
        let duration: UInt64
        if body[0] == 1, body.count >= 32 {
            scale = be32(body, 20)
            duration = UInt64(be32(body, 24)) << 32 | UInt64(be32(body, 28))
        } else {
            scale = be32(body, 12)
            duration = UInt64(be32(body, 16))
        }
        if scale > 0, duration != UInt64(UInt32.max), duration != UInt64.max { result.duration = Double(duration) / Double(scale) }
        return result
    }

    /// The content range of the first box of `type` among the boxes in `from..<to`.
    static func box(_ type: String, from: Int64, to: Int64, read: Reader) throws -> Range<Int64>? {
        var offset = from
        for _ in 0..<1024 {
            guard offset + 8 <= to else { return nil }
            let header = try read(offset, 16)
            guard header.count >= 8 else { return nil }
            var length = Int64(be32(header, 0))
            var headerLength: Int64 = 8
            if length == 1, header.count >= 16 {
                length = Int64(bitPattern: UInt64(be32(header, 8)) << 32 | UInt64(be32(header, 12)))
                headerLength = 16
            } else if length == 0 {
                length = to - offset
            }
            guard length >= headerLength else { return nil }
            if String(decoding: header[4..<8], as: UTF8.self) == type {
                return (offset + headerLength)..<min(to, offset + length)
            }
            offset += length
        }
        return nil
    }

    /// Ogg (Vorbis, Opus): the last page's granule position over the stream's sample rate.
    static func ogg(size: Int64, read: Reader) throws -> Result {
        var result = Result(mime: "audio/ogg", format: "ogg")
        let first = try read(0, 27 + 255 + 32)
        guard first.count > 27 else { return result }
        let segments = Int(first[26])
        let packet = Array(first.dropFirst(27 + segments))
        var rate: Double = 0
        var skip: Double = 0
        if packet.count >= 16, packet[0] == 1, String(decoding: packet[1..<7], as: UTF8.self) == "vorbis" {
            rate = Double(le32(packet, 12))
        } else if packet.count >= 12, String(decoding: packet[0..<8], as: UTF8.self) == "OpusHead" {
            rate = 48000 // Opus granules count 48 kHz samples whatever the input rate
            skip = Double(le16(packet, 10))
        } else if packet.count >= 8, String(decoding: packet[0..<8], as: UTF8.self) == "OpusHead" {
            rate = 48000
        }
        if packet.count >= 8, String(decoding: packet[0..<8], as: UTF8.self) == "OpusHead" { result.format = "opus" }
        guard rate > 0 else { return result }
        let tailStart = max(0, size - 65536)
        let tail = try read(tailStart, Int(size - tailStart))
        var index = tail.count - 14
        while index >= 0 {
            if tail[index] == 0x4F, tail[index + 1] == 0x67, tail[index + 2] == 0x67, tail[index + 3] == 0x53 {
                let granule = UInt64(le32(tail, index + 6)) | UInt64(le32(tail, index + 10)) << 32
                if granule != UInt64.max { result.duration = max(0, (Double(granule) - skip) / rate) }
                break
            }
            index -= 1
        }
        return result
    }

    /// MP3: after an ID3v2 tag, the first frame header; duration from a Xing/Info/VBRI frame count, else
    /// from the bit rate (constant bit rate).
    static func mp3(size: Int64, read: Reader) throws -> Result? {
        var offset: Int64 = 0
        let id3 = try read(0, 10)
        if id3.count == 10, String(decoding: id3[0..<3], as: UTF8.self) == "ID3" {
            let tagSize = Int64(id3[6] & 0x7F) << 21 | Int64(id3[7] & 0x7F) << 14 | Int64(id3[8] & 0x7F) << 7 | Int64(id3[9] & 0x7F)
            offset = 10 + tagSize + (id3[5] & 0x10 != 0 ? 10 : 0)
        }
        // Skip padding between the tag and the first frame (bounded).
        let window = try read(offset, 4096)
        guard let start = (0..<max(0, window.count - 3)).first(where: { window[$0] == 0xFF && window[$0 + 1] & 0xE0 == 0xE0 }) else {
            return offset > 0 ? Result(mime: "audio/mpeg", format: "mp3") : nil
        }
        offset += Int64(start)
        let frame = try read(offset, 200)
        guard frame.count >= 4 else { return nil }
        let versionBits = (frame[1] >> 3) & 0x03 // 3: MPEG 1, 2: MPEG 2, 0: MPEG 2.5
        let layerBits = (frame[1] >> 1) & 0x03 // 1: layer III
        let bitrateIndex = Int(frame[2] >> 4)
        let rateIndex = Int((frame[2] >> 2) & 0x03)
        let mono = (frame[3] >> 6) == 3
        guard versionBits != 1, layerBits == 1, (1...14).contains(bitrateIndex), rateIndex < 3 else { return nil }
        var result = Result(mime: "audio/mpeg", format: "mp3")
        let mpeg1 = versionBits == 3
        let bitrates1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
        let bitrates2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160]
        let bitrate = (mpeg1 ? bitrates1 : bitrates2)[bitrateIndex] * 1000
        let sampleRate = [44100, 48000, 32000][rateIndex] / (mpeg1 ? 1 : versionBits == 2 ? 2 : 4)
        let samplesPerFrame = mpeg1 ? 1152 : 576
        // The Xing/Info tag sits after the side information.
        let side = mpeg1 ? (mono ? 17 : 32) : (mono ? 9 : 17)
        let xing = 4 + side
        if frame.count >= xing + 12 {
            let tag = String(decoding: frame[xing..<xing + 4], as: UTF8.self)
            if tag == "Xing" || tag == "Info", be32(frame, xing + 4) & 1 != 0 {
                let frames = be32(frame, xing + 8)
                result.duration = Double(frames) * Double(samplesPerFrame) / Double(sampleRate)
                return result
            }
        }
        if frame.count >= 36 + 18, String(decoding: frame[36..<40], as: UTF8.self) == "VBRI" {
            let frames = be32(frame, 36 + 14)
            result.duration = Double(frames) * Double(samplesPerFrame) / Double(sampleRate)
            return result
        }
        if bitrate > 0 { result.duration = Double(size - offset) * 8 / Double(bitrate) }
        return result
    }

    // MARK: Integers

    static func be16(_ b: [UInt8], _ i: Int) -> UInt16 { UInt16(b[i]) << 8 | UInt16(b[i + 1]) }
    static func be32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }
    static func le16(_ b: [UInt8], _ i: Int) -> UInt16 { UInt16(b[i]) | UInt16(b[i + 1]) << 8 }
    static func le24(_ b: [UInt8], _ i: Int) -> UInt32 { UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 }
    static func le32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }
}
