import Foundation

/// Throwaway certificate authorities and server certificates for TLS tests, made with the `openssl` CLI
/// (P-256 keys, valid for two days) in a directory of the test's.
public struct TestCertificateAuthority: Sendable {
    /// The CA's certificate (PEM): what clients trust.
    public let certificatePath: String
    let caKeyPath: String
    let directory: URL

    /// A new CA whose certificate's common name is `name`.
    public init(name: String, in directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.directory = directory
        let stem = directory.appendingPathComponent(name.filter { $0.isLetter || $0.isNumber }).path
        certificatePath = stem + "-ca.pem"
        caKeyPath = stem + "-ca.key"
        try Self.openssl(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", caKeyPath,
            "-out", certificatePath, "-days", "2", "-subj", "/CN=\(name)",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    }

    /// Issues a server certificate for `localhost`, `hookbot.internal` and 127.0.0.1 with serial number
    /// `serial` (hex) and common name `commonName`; writes it to `certificatePath` and its key to `keyPath`.
    /// The files are written beside and renamed into place, as a certificate renewal tool does.
    public func issueServerCertificate(
        commonName: String, serial: String, certificatePath: String, keyPath: String
    ) throws {
        let work = directory.appendingPathComponent("issue-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let key = work.appendingPathComponent("server.key").path
        let request = work.appendingPathComponent("server.csr").path
        let certificate = work.appendingPathComponent("server.pem").path
        let extensions = work.appendingPathComponent("server.ext").path
        try """
        subjectAltName = DNS:localhost, DNS:hookbot.internal, IP:127.0.0.1
        basicConstraints = CA:FALSE
        keyUsage = critical, digitalSignature
        extendedKeyUsage = serverAuth

        """.write(toFile: extensions, atomically: true, encoding: .utf8)
        try Self.openssl(
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", request,
            "-subj", "/CN=\(commonName)")
        try Self.openssl(
            "x509", "-req", "-in", request, "-CA", self.certificatePath, "-CAkey", caKeyPath, "-set_serial", "0x\(serial)",
            "-days", "2", "-extfile", extensions, "-out", certificate)
        _ = rename(key, keyPath)
        _ = rename(certificate, certificatePath)
    }

    /// Runs `/usr/bin/openssl` with `arguments`; throws with its output when it fails.
    static func openssl(_ arguments: String...) throws {
        let (status, text) = try runProcess(URL(fileURLWithPath: "/usr/bin/openssl"), arguments)
        guard status == 0 else {
            throw CertificateToolError(message: "openssl \(arguments.joined(separator: " ")) failed: \(text)")
        }
    }
}

public struct CertificateToolError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
