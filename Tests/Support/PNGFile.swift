import Foundation

/// Real PNG files for the media tests, built by hand: rows in stored (uncompressed) deflate blocks, which any
/// decoder (libvips' libpng on the server) reads. By hand because no library the test targets link writes PNG
/// (the server's libvips is linked by the server and IMServerTests only), and the bytes must be known exactly.
public enum PNGFile {
    /// A `width`×`height` PNG, 8 bits per channel, colour type 2 (RGB, 3 bytes a pixel) or 6 (RGBA, 4);
    /// `pixel(x, y)` gives each pixel's bytes.
    public static func make(width: Int, height: Int, colorType: UInt8 = 2, pixel: (Int, Int) -> [UInt8]) -> [UInt8] {
        var raw: [UInt8] = []
        raw.reserveCapacity((width * (colorType == 6 ? 4 : 3) + 1) * height)
        for y in 0..<height {
            raw.append(0) // filter: none
            for x in 0..<width { raw += pixel(x, y) }
        }
        return file(width: UInt32(width), height: UInt32(height), colorType: colorType, idat: zlibStored(raw))
    }

    /// The PNG signature, an IHDR declaring `width`×`height` (8 bits, `colorType`), one IDAT and IEND.
    public static func file(width: UInt32, height: UInt32, colorType: UInt8, idat: [UInt8]) -> [UInt8] {
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            + chunk("IHDR", bigEndian(width) + bigEndian(height) + [8, colorType, 0, 0, 0]) + chunk("IDAT", idat) + chunk("IEND", [])
    }

    /// `raw` as a zlib stream of stored deflate blocks (at most 65,535 bytes each), then its Adler-32.
    public static func zlibStored(_ raw: [UInt8]) -> [UInt8] {
        var zlib: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let count = min(65_535, raw.count - offset)
            let last: UInt8 = offset + count == raw.count ? 1 : 0
            zlib += [last, UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF), UInt8((~count >> 8) & 0xFF)]
            zlib += raw[offset..<offset + count]
            offset += count
        } while offset < raw.count
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in raw {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return zlib + bigEndian(b << 16 | a)
    }

    /// A chunk: its length, type, data and the CRC-32 of type and data.
    public static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in body {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return bigEndian(UInt32(data.count)) + body + bigEndian(~crc)
    }

    public static func bigEndian(_ value: UInt32) -> [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) } }
}
