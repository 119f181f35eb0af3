import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// docs/DEPLOY.md's nginx recipe, run as written: nginx (Debian's) terminates the clients' TLS and opens TLS
/// again to two `hookbot server` nodes sharing PostgreSQL; clients over `wss://` through nginx land on
/// different nodes and talk. Skipped without the throwaway PostgreSQL cluster, as the cluster tests are.
final class ReverseProxyTests: XCTestCase {
    static let nginx = "/usr/sbin/nginx"

    func testNginxFromDeployMDCarriesWSSToTwoNodesEndToEnd() async throws {
        let url = try TestDatabase.postgresURL(schema: TestDatabase.schemaName())
        guard FileManager.default.isExecutableFile(atPath: Self.nginx) else {
            throw XCTSkip("nginx is not installed (make test installs Debian's nginx)")
        }
        let directory = try makeTemporaryDirectory("hookbot-nginx")
        let tls = directory.appendingPathComponent("tls")

        // The nodes' certificate comes from an internal CA nginx trusts; the public one from the CA clients trust.
        let nodesCA = try TestCertificateAuthority(name: "Hookbot Nodes CA", in: directory.appendingPathComponent("ca"))
        let publicCA = try TestCertificateAuthority(name: "Public Test CA", in: directory.appendingPathComponent("ca"))
        try FileManager.default.createDirectory(at: tls, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: nodesCA.certificatePath, toPath: tls.appendingPathComponent("hookbot-nodes-ca.pem").path)
        try publicCA.issueServerCertificate(
            commonName: "chat.example.org", serial: "0A",
            certificatePath: tls.appendingPathComponent("chat.example.org.pem").path,
            keyPath: tls.appendingPathComponent("chat.example.org.key").path)
        let nodeCertificate = directory.appendingPathComponent("node.pem").path
        let nodeKey = directory.appendingPathComponent("node.key").path
        try nodesCA.issueServerCertificate(
            commonName: "hookbot.internal", serial: "0B", certificatePath: nodeCertificate, keyPath: nodeKey)

        var nodes: [ServerHarness] = []
        for _ in 0..<2 {
            nodes.append(
                try await ServerHarness.start { configuration in
                    configuration.databaseURL = url
                    configuration.tls = TLSSettings(certificatePath: nodeCertificate, privateKeyPath: nodeKey)
                })
        }
        let started = nodes
        addTeardownBlock { for node in started { await node.stop() } }

        // nginx with DEPLOY.md's block, on a free loopback port, in the foreground, stopped with the test.
        let port = try freeLoopbackPort()
        let recipe = try Self.deployRecipe()
            .replacingExactlyOnce("listen 443 ssl;", with: "listen 127.0.0.1:\(port) ssl;")
            .replacingExactlyOnce("10.0.0.11:8443", with: "127.0.0.1:\(nodes[0].port)")
            .replacingExactlyOnce("10.0.0.12:8443", with: "127.0.0.1:\(nodes[1].port)")
            .replacingOccurrences(of: "/etc/nginx/tls/", with: tls.path + "/")
        try recipe.write(to: directory.appendingPathComponent("hookbot.conf"), atomically: true, encoding: .utf8)
        let proxy = try NginxProcess(directory: directory)
        defer { proxy.stop() }
        try await proxy.waitUntilServing(port: port, trusting: publicCA.certificatePath)

        // Through nginx over https: the nodes' probes.
        let health = try TLSTestStream.get("/health", port: port, trusting: publicCA.certificatePath)
        XCTAssertTrue(health.hasPrefix("HTTP/1.1 200"), health)

        // Tom and Jerry connect through nginx; least_conn puts them on different nodes.
        func client(_ id: String) -> IMClient {
            nodes[0].client(id) { options in
                options.url = "wss://localhost:\(port)/ws"
                options.trustRoots = .pemFile(publicCA.certificatePath)
            }
        }
        let tom = client("Tom")
        let tomLog = try await openClients([tom])[0]
        let tomNode = try await nodeWithSession(nodes)
        let jerry = client("Jerry")
        let jerryLog = try await openClients([jerry])[0]
        try await waitUntil("Jerry is logged in on the other node") {
            Self.jsonSessions(on: nodes[1 - tomNode]) == 1 && Self.jsonSessions(on: nodes[tomNode]) == 1
        }

        let conversation = try await tom.createConversation(name: "through nginx", members: ["Jerry"])
        try await conversation.send(.text("hello from node \(tomNode)"))
        let atJerry = try await jerryLog.message(in: conversation.id)
        XCTAssertEqual(atJerry.content.text, "hello from node \(tomNode)")
        try await jerry.conversation(conversation.id).send(.text("hello from node \(1 - tomNode)"))
        let atTom = try await tomLog.message(in: conversation.id)
        XCTAssertEqual(atTom.content.text, "hello from node \(1 - tomNode)")
        // A raw WebSocket through nginx too.
        let raw = try RawWebSocket(tlsPort: port, trusting: publicCA.certificatePath)
        XCTAssertEqual(raw.peerCertificateSerial, "0A", "the clients see nginx's public certificate")
        XCTAssertTrue(raw.handshake.hasPrefix("HTTP/1.1 101"), raw.handshake)
        await tom.close()
        await jerry.close()
    }

    /// The nginx block of docs/DEPLOY.md (the fenced block after the comment that names this test).
    static func deployRecipe() throws -> String {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/DEPLOY.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        guard let marker = text.range(of: "Tests/IMServerTests/ReverseProxyTests.swift runs the block below"),
            let open = text.range(of: "```nginx\n", range: marker.upperBound..<text.endIndex),
            let close = text.range(of: "\n```", range: open.upperBound..<text.endIndex)
        else { throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: docs.path]) }
        return String(text[open.upperBound..<close.lowerBound]) + "\n"
    }

    /// Logged-in JSON sessions on a node, from its metrics.
    static func jsonSessions(on node: ServerHarness) -> Int {
        node.server.telemetry.exposition().split(separator: "\n")
            .filter { $0.hasPrefix("hookbot_sessions{") && $0.contains("\"json\"") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
            .reduce(0) { $0 + Int($1) }
    }

    private func nodeWithSession(_ nodes: [ServerHarness]) async throws -> Int {
        var found: Int?
        try await waitUntil("a node has Tom's session") {
            found = nodes.indices.first { Self.jsonSessions(on: nodes[$0]) == 1 }
            return found != nil
        }
        return found ?? 0
    }

    private func freeLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// nginx in the foreground with a configuration of the test's (its own pid, logs and temporary folders
/// in `directory`), under a shell that stops it when the test process goes away, so that it never
/// outlives the test even when the test crashes.
private final class NginxProcess: Sendable {
    private let process: ChildProcess
    private let directory: URL

    init(directory: URL) throws {
        self.directory = directory
        let path = directory.path
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("temp"), withIntermediateDirectories: true)
        try """
        daemon off;
        master_process on;
        worker_processes 1;
        pid \(path)/nginx.pid;
        error_log \(path)/error.log info;
        events { worker_connections 256; }
        http {
            access_log \(path)/access.log;
            client_body_temp_path \(path)/temp/body;
            proxy_temp_path \(path)/temp/proxy;
            fastcgi_temp_path \(path)/temp/fastcgi;
            uwsgi_temp_path \(path)/temp/uwsgi;
            scgi_temp_path \(path)/temp/scgi;
            include \(path)/hookbot.conf;
        }

        """.write(to: directory.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
        let command = """
            \(ReverseProxyTests.nginx) -e \(path)/error.log -p \(path) -c \(path)/nginx.conf & n=$!
            trap 'kill -TERM $n 2>/dev/null; wait $n; exit 0' TERM INT
            while kill -0 \(getpid()) 2>/dev/null && kill -0 $n 2>/dev/null; do sleep 0.2; done
            kill -TERM $n 2>/dev/null; wait $n
            """
        process = try ChildProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", command], output: .discarded, error: .discarded)
    }

    /// Waits until nginx answers TLS on `port`; throws with nginx's error log when it does not.
    func waitUntilServing(port: Int, trusting caFile: String) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, process.isRunning {
            if (try? TLSTestStream(port: port, trusting: caFile)) != nil { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        let log = (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        throw Timeout(waitingFor: "nginx on port \(port); its error log:\n\(log)")
    }

    /// Stops nginx and waits for it.
    func stop() {
        guard process.isRunning else { return }
        process.signal()
        process.waitUntilExit()
    }
}

extension String {
    /// `self` with `text` replaced by `replacement`; `text` must occur exactly once (the test's hold on the
    /// documented recipe: a changed recipe fails here instead of running something else).
    fileprivate func replacingExactlyOnce(_ text: String, with replacement: String) throws -> String {
        let count = components(separatedBy: text).count - 1
        guard count == 1 else {
            throw CocoaError(.formatting, userInfo: [NSLocalizedDescriptionKey: "'\(text)' occurs \(count) times in the recipe"])
        }
        return replacingOccurrences(of: text, with: replacement)
    }
}
