import HookbotTestSupport
import XCTest

/// The hand-written MD5 and SHA-256 the media and file-upload tests use as oracles, against published vectors
/// (RFC 1321 appendix A.5, FIPS 180-2 appendix B) and a multi-block UTF-8 text hashed by coreutils when written.
final class ReferenceDigestTests: XCTestCase {
    func testPublishedVectors() {
        XCTAssertEqual(ReferenceDigest.md5(Array("".utf8)), "d41d8cd98f00b204e9800998ecf8427e")
        XCTAssertEqual(ReferenceDigest.md5(Array("abc".utf8)), "900150983cd24fb0d6963f7d28e17f72")
        XCTAssertEqual(
            ReferenceDigest.md5(Array("12345678901234567890123456789012345678901234567890123456789012345678901234567890".utf8)),
            "57edf4a22be3c955ac49da2e2107b67a")
        XCTAssertEqual(ReferenceDigest.sha256(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(
            ReferenceDigest.sha256(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    func testLongChineseAndEmojiText() {
        let text = String(repeating: "The quick brown fox 快速的狐狸 🦊 ", count: 40)
        XCTAssertEqual(text.utf8.count, 1640)
        // `md5sum` / `sha256sum` of the same 1,640 bytes.
        XCTAssertEqual(ReferenceDigest.md5(Array(text.utf8)), "c6ed83465e866367e332c88f906b337c")
        XCTAssertEqual(ReferenceDigest.sha256(Array(text.utf8)), "ad33cf40da4682dd85f2e8a9882d06f1a3a60f7210e95845014fbc4c0983efe7")
    }
}
