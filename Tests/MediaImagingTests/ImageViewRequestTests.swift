import MediaImaging
import XCTest

/// The imageView grammar, as LeanCloud's SDKs write it (`AV.File#thumbnailURL`: `imageView/<mode>/w/W/h/H/q/Q/format/F`).
final class ImageViewRequestTests: XCTestCase {
    func testTheJavaScriptSDKsDefaultThumbnailURL() throws {
        // thumbnailURL(80, 80) with its defaults: quality 100, scaleToFit true (mode 2), fmt 'png'.
        let request = try XCTUnwrap(try ImageViewRequest.fromQuery("imageView/2/w/80/h/80/q/100/format/png"))
        XCTAssertEqual(request, ImageViewRequest(mode: .fit, width: 80, height: 80, quality: 100, format: .png))
    }

    func testCropModeWidthOnlyQiniuSpellingAndOtherQueryParts() throws {
        XCTAssertEqual(
            try ImageViewRequest.fromQuery("imageView/1/w/120/h/60/q/80/format/jpg"),
            ImageViewRequest(mode: .crop, width: 120, height: 60, quality: 80, format: .jpeg))
        XCTAssertEqual(try ImageViewRequest.fromQuery("imageView/2/w/300"), ImageViewRequest(mode: .fit, width: 300, height: nil))
        XCTAssertEqual(
            try ImageViewRequest.fromQuery("t=1&imageView2/2/h/50/format/WEBP&x=y"),
            ImageViewRequest(mode: .fit, width: nil, height: 50, format: .webp))
        XCTAssertEqual(
            try ImageViewRequest.fromQuery("imageView%2F2%2Fw%2F64"), ImageViewRequest(mode: .fit, width: 64, height: nil))
        XCTAssertNil(try ImageViewRequest.fromQuery("download=1"))
        XCTAssertNil(try ImageViewRequest.fromQuery(""))
    }

    func testMalformedRequestsAreRefusedWithCode4621AndAReason() {
        let cases: [(String, String)] = [
            ("imageView", "needs a mode"),
            ("imageView/0/w/10", "mode 0 is not supported"),
            ("imageView/3/w/10", "mode 3 is not supported"),
            ("imageView/two/w/10", "mode two is not supported"),
            ("imageView/2", "needs w or h"),
            ("imageView/1/w/10", "needs both w and h"),
            ("imageView/2/w/0/h/10", "w must be 1-4096, got 0"),
            ("imageView/2/w/-5", "w must be 1-4096, got -5"),
            ("imageView/2/w/50000/h/10", "w must be 1-4096, got 50000"),
            ("imageView/2/w/abc", "w must be 1-4096, got abc"),
            ("imageView/2/w/10/q/0", "quality must be 1-100, got 0"),
            ("imageView/2/w/10/q/101", "quality must be 1-100, got 101"),
            ("imageView/2/w/10/format/gif", "format gif is not supported"),
            ("imageView/2/w/10/format/tiff", "format tiff is not supported"),
            ("imageView/2/w/10/h", "h has no value"),
            ("imageView/2/w/10/w/20", "w is given twice"),
            ("imageView/2/w/10/interlace/1", "parameter interlace is not supported"),
        ]
        for (query, expected) in cases {
            XCTAssertThrowsError(try ImageViewRequest.fromQuery(query), query) { error in
                guard let error = error as? ThumbnailError, case .badRequest = error else {
                    return XCTFail("\(query): \(error)")
                }
                XCTAssertEqual(error.code, 4621, query)
                XCTAssertEqual(error.httpStatus, 400, query)
                XCTAssertTrue(error.reason.contains(expected), "\(query): \(error.reason)")
            }
        }
    }
}
