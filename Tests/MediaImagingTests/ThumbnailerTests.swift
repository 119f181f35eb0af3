import CVips
import Foundation
import MediaImaging
import XCTest

/// Thumbnails of real images libvips writes for each test (noise, so no encoder can cheat), bombs and junk.
final class ThumbnailerTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-thumbs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        _ = try? Thumbnailer.header(path: "/dev/null") // starts libvips before the fixtures are written
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// A noise image libvips writes; `options` are its saver's (`[compression=0]` makes a big PNG quickly).
    private func fixture(_ name: String, _ width: Int, _ height: Int, options: String = "") throws -> String {
        let path = directory.appendingPathComponent(name).path
        XCTAssertEqual(hb_vips_write_noise(path + options, Int32(width), Int32(height)), 0, "writing \(name)")
        return path
    }

    private func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let url = directory.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        return url.path
    }

    func testFitWithinEachSourceFormatIntoEachOutputFormat() async throws {
        let thumbnailer = Thumbnailer()
        for source in ["a.png", "a.jpg", "a.webp"] {
            let path = try fixture(source, 640, 480)
            let header = try Thumbnailer.header(path: path)
            XCTAssertEqual([header.width, header.height, header.pages], [640, 480, 1], source)
            for format in ImageFormat.allCases {
                let request = try XCTUnwrap(try ImageViewRequest.fromQuery("imageView/2/w/100/h/100/q/80/format/\(format.rawValue)"))
                let thumbnail = try await thumbnailer.thumbnail(path: path, request: request)
                // 640×480 fitted within 100×100 keeps 4:3.
                XCTAssertEqual([thumbnail.width, thumbnail.height], [100, 75], "\(source) → \(format)")
                XCTAssertEqual(thumbnail.format, format)
                // The bytes really are that format and size: read them back through libvips' header.
                let out = try write("out.\(format.rawValue)", thumbnail.bytes)
                let readBack = try Thumbnailer.header(path: out)
                XCTAssertEqual(readBack.format, format.rawValue, "\(source) → \(format)")
                XCTAssertEqual([readBack.width, readBack.height], [100, 75], "\(source) → \(format)")
            }
        }
    }

    func testCropWidthOnlyNoEnlargingAndTheSourceFormatByDefault() async throws {
        let thumbnailer = Thumbnailer()
        let path = try fixture("wide.jpg", 800, 200)
        let crop = try await thumbnailer.thumbnail(path: path, request: ImageViewRequest(mode: .crop, width: 50, height: 50))
        XCTAssertEqual([crop.width, crop.height], [50, 50])
        XCTAssertEqual(crop.format, .jpeg)
        XCTAssertEqual(Array(crop.bytes.prefix(3)), [0xFF, 0xD8, 0xFF])
        let widthOnly = try await thumbnailer.thumbnail(path: path, request: ImageViewRequest(mode: .fit, width: 200, height: nil))
        XCTAssertEqual([widthOnly.width, widthOnly.height], [200, 50])
        let heightOnly = try await thumbnailer.thumbnail(path: path, request: ImageViewRequest(mode: .fit, width: nil, height: 100))
        XCTAssertEqual([heightOnly.width, heightOnly.height], [400, 100])
        // Asked for more than the source has: the source's size, never enlarged.
        let small = try fixture("small.png", 60, 30)
        let big = try await thumbnailer.thumbnail(path: small, request: ImageViewRequest(mode: .fit, width: 400, height: 400))
        XCTAssertEqual([big.width, big.height], [60, 30])
        XCTAssertEqual(big.format, .png)
    }

    func testAGIFSourceComesBackAsPNG() async throws {
        let path = try fixture("anim.gif", 300, 200)
        XCTAssertEqual(try Thumbnailer.header(path: path).format, "gif")
        let thumbnail = try await Thumbnailer().thumbnail(path: path, request: ImageViewRequest(mode: .fit, width: 30, height: 30))
        XCTAssertEqual([thumbnail.width, thumbnail.height], [30, 20])
        XCTAssertEqual(thumbnail.format, .png)
        XCTAssertEqual(Array(thumbnail.bytes.prefix(4)), [0x89, 0x50, 0x4E, 0x47])
    }

    /// A source written by the caller (a store's stream) to a temporary file inside the job's slot, removed after,
    /// whether the thumbnail was made or refused.
    func testASourceWrittenForTheJobIsRemovedAfterwards() async throws {
        let source = try Data(contentsOf: URL(fileURLWithPath: try fixture("source.webp", 200, 100)))
        let thumbnailer = Thumbnailer()
        var written: [String] = []
        let thumbnail = try await thumbnailer.thumbnail(request: ImageViewRequest(mode: .fit, width: 50, height: nil)) { path in
            written.append(path)
            try source.write(to: URL(fileURLWithPath: path))
        }
        XCTAssertEqual([thumbnail.width, thumbnail.height, written.count], [50, 25, 1])
        XCTAssertEqual(thumbnail.format, .webp)
        do {
            _ = try await thumbnailer.thumbnail(request: ImageViewRequest(mode: .fit, width: 50, height: nil)) { path in
                written.append(path)
                try Data("junk".utf8).write(to: URL(fileURLWithPath: path))
            }
            XCTFail("junk was thumbnailed")
        } catch let error as ThumbnailError {
            XCTAssertEqual(error.code, 4622)
        }
        XCTAssertEqual(written.count, 2)
        XCTAssertNotEqual(written[0], written[1])
        for path in written { XCTAssertFalse(FileManager.default.fileExists(atPath: path), path) }
    }

    /// A 70-byte PNG whose header declares 50000×50000 (2.5 gigapixels, 7.5 GB decoded): refused from the
    /// header, before libvips decodes a single row.
    func testADecompressionBombIsRefusedFromItsHeader() async throws {
        let path = try write("bomb.png", Self.png(width: 50_000, height: 50_000))
        let header = try Thumbnailer.header(path: path)
        XCTAssertEqual([header.width, header.height], [50_000, 50_000])
        let request = ImageViewRequest(mode: .fit, width: 100, height: 100)
        do {
            _ = try await Thumbnailer().thumbnail(path: path, request: request)
            XCTFail("a 50000×50000 PNG was thumbnailed")
        } catch {
            XCTAssertEqual(error, .sourceTooLarge(width: 50_000, height: 50_000, limit: 50_000_000))
            XCTAssertEqual(error.code, 4623)
            XCTAssertEqual(error.httpStatus, 422)
            XCTAssertTrue(error.reason.contains("2500000000 pixels"), error.reason)
        }
        // A limit is a limit: a real 640×480 image is refused under a 300000-pixel cap too.
        let real = try fixture("real.png", 640, 480)
        do {
            _ = try await Thumbnailer(limits: ThumbnailLimits(maxSourcePixels: 300_000)).thumbnail(path: real, request: request)
            XCTFail("the pixel cap was not applied")
        } catch {
            XCTAssertEqual(error, .sourceTooLarge(width: 640, height: 480, limit: 300_000))
        }
    }

    func testJunkTruncatedAndForeignFormatsAreRefusedWithClearErrors() async throws {
        let thumbnailer = Thumbnailer()
        let request = ImageViewRequest(mode: .fit, width: 100, height: 100)
        // Junk (an ELF executable's first bytes named .png): no loader.
        let junk = try write("evil.png", [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0] + [UInt8](repeating: 0x41, count: 200))
        await assertThrows(try await thumbnailer.thumbnail(path: junk, request: request)) { error in
            XCTAssertEqual(error.code, 4622)
            XCTAssertEqual(error.httpStatus, 415)
            XCTAssertTrue(error.reason.hasPrefix("not a supported image"), error.reason)
        }
        // Empty.
        let empty = try write("empty.jpg", [])
        await assertThrows(try await thumbnailer.thumbnail(path: empty, request: request)) { XCTAssertEqual($0.code, 4622) }
        // A format libvips knows but Hookbot does not enable (SVG could fetch files and run a renderer).
        let svg = try write("x.svg", Array(#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>"#.utf8))
        await assertThrows(try await thumbnailer.thumbnail(path: svg, request: request)) { error in
            XCTAssertEqual(error.code, 4622)
            XCTAssertTrue(error.reason.contains("not enabled"), error.reason)
        }
        // A real JPEG cut in half: its header reads, its pixels do not.
        let whole = try Data(contentsOf: URL(fileURLWithPath: try fixture("whole.jpg", 400, 400)))
        let truncated = try write("half.jpg", [UInt8](whole.prefix(whole.count / 2)))
        await assertThrows(try await thumbnailer.thumbnail(path: truncated, request: request)) { error in
            XCTAssertEqual(error.code, 4626)
            XCTAssertEqual(error.httpStatus, 422)
        }
        // A missing file.
        await assertThrows(try await thumbnailer.thumbnail(path: directory.appendingPathComponent("none.png").path, request: request)) {
            XCTAssertEqual($0.code, 4622)
        }
    }

    func testAJobPastItsTimeLimitIsStopped() async throws {
        // A 2000×2000 PNG has no shrink-on-load: decoding it takes well over a millisecond (~60 ms here).
        let path = try fixture("slow.png", 2000, 2000, options: "[compression=0]")
        let thumbnailer = Thumbnailer(limits: ThumbnailLimits(timeLimit: .microseconds(500)))
        await assertThrows(try await thumbnailer.thumbnail(path: path, request: ImageViewRequest(mode: .fit, width: 64, height: 64))) {
            error in
            XCTAssertEqual(error, .timedOut(milliseconds: 0))
            XCTAssertEqual(error.code, 4625)
        }
        // The same job within a normal limit succeeds (the limit, not the image, stopped it).
        let thumbnail = try await Thumbnailer().thumbnail(path: path, request: ImageViewRequest(mode: .fit, width: 64, height: 64))
        XCTAssertEqual([thumbnail.width, thumbnail.height], [64, 64])
    }

    func testJobsBeyondTheWorkersAndTheQueueAreRefusedAsBusy() async throws {
        let path = try fixture("busy.png", 2000, 2000, options: "[compression=0]")
        // One worker, one waiting place: of six jobs started together (each decodes 4 megapixels, ~100 ms), one
        // runs, one waits, the others are refused; never more than two succeed unless a job ended before the
        // last one arrived, which a loaded machine may cause, so the test asks only for refusals and no other errors.
        let thumbnailer = Thumbnailer(limits: ThumbnailLimits(maxConcurrentJobs: 1, maxQueuedJobs: 1))
        let request = ImageViewRequest(mode: .fit, width: 32, height: 32)
        let outcomes = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    do {
                        _ = try await thumbnailer.thumbnail(path: path, request: request)
                        return 0
                    } catch let error as ThumbnailError {
                        return error.code
                    } catch {
                        return -1
                    }
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertGreaterThanOrEqual(outcomes.filter { $0 == 0 }.count, 2, "\(outcomes)")
        XCTAssertGreaterThanOrEqual(outcomes.filter { $0 == 4624 }.count, 1, "\(outcomes)")
        XCTAssertEqual(outcomes.filter { $0 != 0 && $0 != 4624 }, [], "\(outcomes)")
        // Once they are done, the thumbnailer takes work again.
        let again = try await thumbnailer.thumbnail(path: path, request: request)
        XCTAssertEqual([again.width, again.height], [32, 32])
    }

    private func assertThrows<T>(
        _ body: @autoclosure () async throws(ThumbnailError) -> T, file: StaticString = #filePath, line: UInt = #line,
        _ check: (ThumbnailError) -> Void
    ) async {
        do {
            _ = try await body()
            XCTFail("no error", file: file, line: line)
        } catch {
            check(error)
        }
    }

    /// A valid PNG signature, IHDR (8-bit RGB) declaring `width`×`height`, one tiny IDAT and IEND.
    static func png(width: UInt32, height: UInt32) -> [UInt8] {
        func be(_ value: UInt32) -> [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) } }
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + data
            return be(UInt32(data.count)) + body + be(crc32(body))
        }
        let ihdr = be(width) + be(height) + [8, 2, 0, 0, 0]
        let idat: [UInt8] = [0x78, 0x9C, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01] // zlib of one zero byte
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", ihdr) + chunk("IDAT", idat) + chunk("IEND", [])
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
