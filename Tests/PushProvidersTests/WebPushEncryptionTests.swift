import Crypto
import XCTest

@testable import PushProviders

/// RFC 8291's worked example (§5 and appendix A), byte for byte, and a round trip through the receiver's side.
final class WebPushEncryptionTests: XCTestCase {
    static let plaintext = "When I grow up, I want to be a watermelon"
    static let serverPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let serverPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let userAgentPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let userAgentPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let body =
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

    func testRFC8291ExampleIsReproducedByteForByte() throws {
        let serverKey = try P256.KeyAgreement.PrivateKey(rawRepresentation: XCTUnwrap(Base64URL.decode(Self.serverPrivate)))
        XCTAssertEqual(Base64URL.encode(serverKey.publicKey.x963Representation), Self.serverPublic)
        let body = try WebPushEncryption.encrypt(
            Array(Self.plaintext.utf8), userAgentPublicKey: XCTUnwrap(Base64URL.decode(Self.userAgentPublic)),
            authSecret: XCTUnwrap(Base64URL.decode(Self.authSecret)), salt: XCTUnwrap(Base64URL.decode(Self.salt)), serverKey: serverKey)
        XCTAssertEqual(Base64URL.encode(body), Self.body)
    }

    func testRFC8291ExampleDecryptsWithTheUserAgentsKey() throws {
        let userAgentKey = try P256.KeyAgreement.PrivateKey(rawRepresentation: XCTUnwrap(Base64URL.decode(Self.userAgentPrivate)))
        let plaintext = try WebPushEncryption.decrypt(
            XCTUnwrap(Base64URL.decode(Self.body)), userAgentKey: userAgentKey, authSecret: XCTUnwrap(Base64URL.decode(Self.authSecret)))
        XCTAssertEqual(String(decoding: plaintext, as: UTF8.self), Self.plaintext)
    }
}
