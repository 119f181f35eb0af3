import Crypto
import Foundation

/// Message encryption for Web Push (RFC 8291) in the `aes128gcm` content coding (RFC 8188): one record,
/// the application server's ephemeral public key as the key id.
public enum WebPushEncryption {
    /// The record size written in the header (what RFC 8291's example uses).
    public static let recordSize = 4096
    /// Header: salt (16) + record size (4) + key id length (1) + key id (65).
    public static let headerLength = 86
    /// Push services take 4096 bytes of body; the header, the padding delimiter and the GCM tag leave this much
    /// for the plaintext.
    public static let maxPlaintextBytes = 4096 - headerLength - 1 - 16

    /// Encrypts `plaintext` for the subscription whose public key is `userAgentPublicKey` (uncompressed P-256,
    /// 65 bytes) and secret `authSecret` (16 bytes). `salt` and `serverKey` are random unless given (RFC 8291's
    /// example gives them).
    public static func encrypt(
        _ plaintext: [UInt8], userAgentPublicKey: [UInt8], authSecret: [UInt8], salt: [UInt8]? = nil,
        serverKey: P256.KeyAgreement.PrivateKey = P256.KeyAgreement.PrivateKey()
    ) throws -> [UInt8] {
        guard plaintext.count <= maxPlaintextBytes else {
            throw PushError.payloadTooLarge("Web Push payload is \(plaintext.count) bytes, the limit is \(maxPlaintextBytes)")
        }
        let userAgentKey = try publicKey(userAgentPublicKey)
        guard authSecret.count == 16 else {
            throw PushError.invalidSubscriptionKeys("the subscription's auth secret is \(authSecret.count) bytes, not 16")
        }
        let salt = salt ?? (0..<16).map { _ in UInt8.random(in: .min ... .max) }
        let serverPublic = Array(serverKey.publicKey.x963Representation)
        let shared = try serverKey.sharedSecretFromKeyAgreement(with: userAgentKey)
        let ecdhSecret = shared.withUnsafeBytes { Array($0) }
        let (key, nonce) = contentKeys(
            ecdhSecret: ecdhSecret, authSecret: authSecret, userAgentPublic: userAgentPublicKey, serverPublic: serverPublic, salt: salt)
        // One record: the plaintext, then the last-record delimiter 0x02 and no padding.
        let sealed = try AES.GCM.seal(plaintext + [0x02], using: key, nonce: AES.GCM.Nonce(data: nonce))
        var body = salt
        body += withUnsafeBytes(of: UInt32(recordSize).bigEndian) { Array($0) }
        body.append(UInt8(serverPublic.count))
        body += serverPublic
        body += sealed.ciphertext
        body += sealed.tag
        return body
    }

    /// What the user agent does (RFC 8291 §3.4 read backwards): answers the plaintext of `body` for the
    /// subscription's private key and auth secret. Hookbot does not receive pushes; this is for checking.
    public static func decrypt(_ body: [UInt8], userAgentKey: P256.KeyAgreement.PrivateKey, authSecret: [UInt8]) throws -> [UInt8] {
        guard body.count > headerLength + 16 else { throw PushError.invalidNotification("aes128gcm body too short") }
        let salt = Array(body[0..<16])
        let idLength = Int(body[20])
        guard idLength == 65, body.count > 21 + idLength + 16 else {
            throw PushError.invalidNotification("aes128gcm key id is \(idLength) bytes, not a P-256 key")
        }
        let serverPublic = Array(body[21..<(21 + idLength)])
        let shared = try userAgentKey.sharedSecretFromKeyAgreement(with: try publicKey(serverPublic))
        let ecdhSecret = shared.withUnsafeBytes { Array($0) }
        let (key, nonce) = contentKeys(
            ecdhSecret: ecdhSecret, authSecret: authSecret, userAgentPublic: Array(userAgentKey.publicKey.x963Representation),
            serverPublic: serverPublic, salt: salt)
        let record = body[(21 + idLength)...]
        let box = try AES.GCM.SealedBox(
            nonce: AES.GCM.Nonce(data: nonce), ciphertext: record.dropLast(16), tag: record.suffix(16))
        var padded = Array(try AES.GCM.open(box, using: key))
        while padded.last == 0 { padded.removeLast() }
        guard padded.last == 0x02 else { throw PushError.invalidNotification("aes128gcm record has no last-record delimiter") }
        padded.removeLast()
        return padded
    }

    /// RFC 8291 §3.3-3.4 and RFC 8188 §2.2-2.3: the content-encryption key and nonce.
    static func contentKeys(
        ecdhSecret: [UInt8], authSecret: [UInt8], userAgentPublic: [UInt8], serverPublic: [UInt8], salt: [UInt8]
    ) -> (SymmetricKey, [UInt8]) {
        let keyInfo = Array("WebPush: info".utf8) + [0] + userAgentPublic + serverPublic
        let prkKey = HKDF<SHA256>.extract(inputKeyMaterial: SymmetricKey(data: ecdhSecret), salt: authSecret)
        let ikm = HKDF<SHA256>.expand(pseudoRandomKey: prkKey, info: keyInfo, outputByteCount: 32)
        let prk = HKDF<SHA256>.extract(inputKeyMaterial: ikm, salt: salt)
        let cek = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Array("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let nonce = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: Array("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
        return (cek, nonce.withUnsafeBytes { Array($0) })
    }

    static func publicKey(_ bytes: [UInt8]) throws -> P256.KeyAgreement.PublicKey {
        guard bytes.count == 65, bytes.first == 0x04 else {
            throw PushError.invalidSubscriptionKeys("p256dh is \(bytes.count) bytes, not an uncompressed P-256 key (65 bytes, 0x04 first)")
        }
        do {
            return try P256.KeyAgreement.PublicKey(x963Representation: bytes)
        } catch {
            throw PushError.invalidSubscriptionKeys("p256dh is not a point on P-256")
        }
    }
}
