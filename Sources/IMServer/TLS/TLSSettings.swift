import Foundation

/// TLS on the server's port: the certificate chain and private key files (PEM), watched for changes.
///
/// With TLS the port speaks TLS only: clients connect to `wss://HOST:PORT/ws`, probes and metrics are
/// `https://`. The protocol floor is TLS 1.2 and TLS 1.2 connections use only forward-secret AEAD cipher
/// suites (ECDHE with AES-GCM or ChaCha20-Poly1305, `cipherSuites`); TLS 1.3 uses BoringSSL's suites (all
/// AEAD). Everything else is swift-nio-ssl's server defaults (no client certificates, no renegotiation).
public struct TLSSettings: Sendable, Equatable {
    /// The certificate, followed by its intermediates, in PEM.
    public var certificatePath: String
    /// The certificate's private key in PEM (PKCS#8, RSA or EC).
    public var privateKeyPath: String
    /// How often the two files are read to see whether they changed. A change (new contents, a renamed-in
    /// file or a new symlink target) is loaded and used for the connections accepted from then on; open
    /// connections keep the certificate they were accepted with. A pair that does not load (for example
    /// the certificate replaced before its key) is logged and the previous one stays in use until the
    /// files change again.
    public var reloadInterval: Duration = .seconds(5)

    /// The TLS 1.2 cipher suites offered (OpenSSL names): forward secrecy and AEAD only, as Mozilla's
    /// "intermediate" profile less the DHE suites BoringSSL does not implement.
    public static let cipherSuites = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")

    public init(certificatePath: String, privateKeyPath: String) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
    }
}
