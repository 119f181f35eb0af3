// swift-tools-version: 6.2
import PackageDescription

/// The library products the targets below depend on, each spelled once.
extension Target.Dependency {
    static let grdb: Self = .product(name: "GRDB", package: "GRDB.swift")
    static let grdbSQLite: Self = .product(name: "GRDBSQLite", package: "GRDB.swift")
    static let tomlKit: Self = .product(name: "TOMLKit", package: "TOMLKit")
    static let asyncHTTPClient: Self = .product(name: "AsyncHTTPClient", package: "async-http-client")
    static let hummingbird: Self = .product(name: "Hummingbird", package: "hummingbird")
    static let hummingbirdCore: Self = .product(name: "HummingbirdCore", package: "hummingbird")
    static let hummingbirdWSClient: Self = .product(name: "HummingbirdWSClient", package: "hummingbird-websocket")
    static let hummingbirdWebSocket: Self = .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket")
    static let postgresNIO: Self = .product(name: "PostgresNIO", package: "postgres-nio")
    static let argumentParser: Self = .product(name: "ArgumentParser", package: "swift-argument-parser")
    static let crypto: Self = .product(name: "Crypto", package: "swift-crypto")
    static let cryptoExtras: Self = .product(name: "_CryptoExtras", package: "swift-crypto")
    static let httpTypes: Self = .product(name: "HTTPTypes", package: "swift-http-types")
    static let logging: Self = .product(name: "Logging", package: "swift-log")
    static let coreMetrics: Self = .product(name: "CoreMetrics", package: "swift-metrics")
    static let nioCore: Self = .product(name: "NIOCore", package: "swift-nio")
    static let nioHTTP1: Self = .product(name: "NIOHTTP1", package: "swift-nio")
    static let nioPosix: Self = .product(name: "NIOPosix", package: "swift-nio")
    static let nioTLS: Self = .product(name: "NIOTLS", package: "swift-nio")
    static let nioWebSocket: Self = .product(name: "NIOWebSocket", package: "swift-nio")
    static let nioFileSystem: Self = .product(name: "_NIOFileSystem", package: "swift-nio")
    static let nioHTTPTypes: Self = .product(name: "NIOHTTPTypes", package: "swift-nio-extras")
    static let nioHTTPTypesHTTP1: Self = .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras")
    static let nioHTTP2: Self = .product(name: "NIOHTTP2", package: "swift-nio-http2")
    static let nioSSL: Self = .product(name: "NIOSSL", package: "swift-nio-ssl")
    static let prometheus: Self = .product(name: "Prometheus", package: "swift-prometheus")
    static let swiftProtobuf: Self = .product(name: "SwiftProtobuf", package: "swift-protobuf")
    static let serviceLifecycle: Self = .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
}

let package = Package(
    name: "hookbot",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "hookbot", targets: ["hookbot"]),
        .library(name: "IMCore", targets: ["IMCore"]),
        .library(name: "IMServer", targets: ["IMServer"]),
        .library(name: "IMProto", targets: ["IMProto"]),
        .library(name: "IMClient", targets: ["IMClient"]),
        .library(name: "HookRuntime", targets: ["HookRuntime"]),
        .library(name: "BotHost", targets: ["BotHost"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/LebJe/TOMLKit.git", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
    ],
    targets: [
        .target(name: "IMCore"),
        // What clients sign and servers check (LeanCloud's signature texts, HMAC-SHA1): one place for both.
        .target(name: "IMSignatures", dependencies: [.crypto]),
        // Prometheus metrics: one registry per server process, reached through swift-metrics factories.
        .target(
            name: "Telemetry",
            dependencies: [
                .coreMetrics, .prometheus,
            ]
        ),
        // LeanCloud's protobuf wire format (generated from proto/ by scripts/generate-proto.sh) and its
        // codec; kept out of IMCore so that clients and the Lua runtime do not need SwiftProtobuf.
        .target(
            name: "IMProto",
            dependencies: ["IMCore", .swiftProtobuf]
        ),
        // SQLite's default VFS with a transaction's WAL writes collected into one (see wal_writes.c).
        .target(name: "CWALWrites", linkerSettings: [.linkedLibrary("sqlite3")]),
        .target(
            name: "IMServer",
            dependencies: [
                "IMCore", "IMProto", "IMSignatures", "Telemetry", "MediaImaging", "PushProviders", "CWALWrites",
                .hummingbird, .hummingbirdCore, .nioHTTPTypes, .nioHTTPTypesHTTP1, .nioHTTP1, .hummingbirdWebSocket,
                .grdb, .grdbSQLite, .postgresNIO, .logging, .crypto, .nioCore, .nioPosix, .nioWebSocket, .nioSSL, .serviceLifecycle,
            ]
        ),
        .target(
            name: "IMClient",
            dependencies: [
                "IMCore", "IMSignatures",
                // The WebSocket (WebSocketChannel.swift) on NIO's own codec.
                .logging, .nioCore, .nioPosix, .nioHTTP1, .nioWebSocket, .nioSSL,
                // Media uploads and downloads over HTTP (MediaTransfer.swift), files read and written without blocking.
                .asyncHTTPClient, .nioFileSystem,
            ]
        ),
        .systemLibrary(
            name: "CLua",
            pkgConfig: "lua5.4",
            providers: [.apt(["liblua5.4-dev"])]
        ),
        // libvips (Debian's libvips-dev) for thumbnails: the few variadic calls wrapped in Sources/CVips/shim.h.
        .systemLibrary(
            name: "CVips",
            pkgConfig: "vips",
            providers: [.apt(["libvips-dev"])]
        ),
        // PCRE2 (Debian's libpcre2-dev) for the plugins' bounded regular expressions (ctx.matcher): match and depth
        // limits per call, so a pattern that could backtrack catastrophically cannot stall the bot.
        .systemLibrary(
            name: "CPCRE2",
            pkgConfig: "libpcre2-8",
            providers: [.apt(["libpcre2-dev"])]
        ),
        // Bounded thumbnails (LeanCloud's imageView URLs) on libvips: source pixels, concurrency, time limit.
        .target(name: "MediaImaging", dependencies: ["CVips"]),
        // The sandbox's limits in C (allocator, instruction and deadline hook, Swift function trampoline).
        .target(name: "LuaSandbox", dependencies: ["CLua"]),
        .target(
            name: "HookRuntime",
            dependencies: [
                "CLua", "LuaSandbox", "IMCore", "CPCRE2", "HookbotConfig",
                // Locale files are TOML. Named directly (as BotHost does) so that a clean build finds TOMLKit's C
                // module CTOML when it emits this module: through HookbotConfig alone it failed with "missing
                // required module 'CTOML'".
                .tomlKit, .coreMetrics,
                // HMAC of card buttons (Card.swift)
                .crypto, .grdb, .logging, .nioCore, .nioPosix,
            ],
            // The Lua prelude every plugin state runs first (Prelude.swift finds it beside the binary).
            resources: [.copy("Resources/prelude.lua")]
        ),
        .target(
            name: "BotHost",
            dependencies: [
                "IMCore", "IMClient", "HookRuntime", "BotRouting", "HookbotConfig", "PushProviders",
                .coreMetrics, .tomlKit, .asyncHTTPClient, .logging, .nioCore, .nioPosix,
            ]
        ),
        // The browser console (static page in Resources/) and the admin HTTP API it uses.
        .target(
            name: "Console",
            dependencies: [
                "BotHost", "HookRuntime", "IMServer", "IMCore", "IMSignatures", "Telemetry",
                .crypto, .httpTypes, .hummingbird, .logging, .nioCore, .serviceLifecycle,
            ],
            resources: [.copy("Resources")]
        ),
        .executableTarget(
            name: "hookbot",
            dependencies: [
                "IMCore", "IMServer", "IMClient", "HookRuntime", "BotHost", "BotHub", "PluginTester", "Console", "Telemetry", "Benchmarks",
                .argumentParser, .logging,
            ]
        ),
        // A server and its bot in one process (`hookbot run` without `--server`): the only bot module that
        // links the server.
        .target(
            name: "BotHub",
            dependencies: ["BotHost", "IMClient", "IMCore", "IMServer", .logging]
        ),
        // Child processes started with `posix_spawn` (not Foundation's `Process`, see ChildProcess.swift): the tests'
        // servers and tools, and the benchmark's `hookbot server` and remote bot.
        .target(name: "ChildProcesses"),
        // The benchmark workloads of `hookbot bench` (hook dispatch, ping-pong, moderation, fan-out, RSS, media):
        // only the command-line tool links them.
        .target(
            name: "Benchmarks",
            dependencies: [
                "BotHost", "BotHub", "ChildProcesses", "HookRuntime", "IMClient", "IMCore", "IMServer", "MediaImaging", "CVips",
                "PushProviders", .asyncHTTPClient, .crypto, .nioPosix, .hummingbirdWSClient, .logging, .nioCore, .nioHTTP1,
                .nioWebSocket,
            ]
        ),
        // hookbot.toml: TOML (TOMLKit) into JSON values, with errors that name file, line and key.
        .target(
            name: "HookbotConfig",
            dependencies: ["IMCore", .tomlKit]
        ),
        // The routing core a running bot and `hookbot test` share: no transport, no server.
        .target(
            name: "BotRouting",
            dependencies: ["HookRuntime", .logging]
        ),
        .target(
            name: "PluginTester",
            dependencies: ["HookRuntime", "BotRouting", .logging]
        ),
        // Fuzz targets (libFuzzer): `make fuzz` builds them with coverage, AddressSanitizer and -DFUZZING and
        // runs each for a bounded time; a normal build makes them replay files (`fuzz-json-command crash-…`).
        .target(name: "FuzzSupport", path: "Fuzz/Support"),
        .executableTarget(name: "fuzz-json-command", dependencies: ["FuzzSupport", "IMCore"], path: "Fuzz/JSONCommand"),
        .executableTarget(
            name: "fuzz-protobuf-command", dependencies: ["FuzzSupport", "IMCore", "IMProto"], path: "Fuzz/ProtobufCommand"),
        .executableTarget(name: "fuzz-toml-config", dependencies: ["FuzzSupport", "HookbotConfig"], path: "Fuzz/TOMLConfig"),
        .testTarget(name: "PluginTesterTests", dependencies: ["PluginTester", "HookRuntime", "HookbotTestSupport"]),
        .testTarget(name: "IMCoreTests", dependencies: ["IMCore", "HookbotTestSupport"]),
        .testTarget(name: "MediaImagingTests", dependencies: ["MediaImaging", "CVips"]),
        .testTarget(name: "HookRuntimeTests", dependencies: ["HookRuntime"]),
        .target(
            name: "HookbotTestSupport",
            dependencies: [
                "ChildProcesses", "IMClient", "IMServer", "IMCore", "IMSignatures",
                .nioCore, .nioPosix, .nioSSL, .nioTLS,
            ],
            path: "Tests/Support"),
        .testTarget(
            name: "BotHostTests",
            dependencies: [
                "BotHost", "BotHub", "IMCore", "IMServer", "IMClient", "HookRuntime", "HookbotTestSupport", "PushProviders",
                .crypto, .cryptoExtras, .nioPosix,
            ]),
        .testTarget(
            name: "ConsoleTests",
            dependencies: [
                "Console", "BotHost", "BotHub", "IMServer", "IMCore", "IMClient", "HookRuntime", "Telemetry", "HookbotTestSupport",
                .hummingbird, .serviceLifecycle,
            ]),
        // Offline push (issue 27): the provider clients (APNs, FCM HTTP v1, Web Push, UnifiedPush, webhook) over one
        // shared HTTP client; what to push and to whom comes later.
        .target(
            name: "PushProviders",
            dependencies: [
                "IMCore",
                .asyncHTTPClient, .crypto, .cryptoExtras, .nioCore, .nioHTTP1, .nioSSL,
            ]
        ),
        .testTarget(
            name: "PushProvidersTests",
            dependencies: [
                "PushProviders", "IMCore", "HookbotTestSupport",
                .crypto, .cryptoExtras, .nioCore, .nioPosix, .nioHTTP1, .nioHTTP2, .nioSSL,
            ]
        ),
        .testTarget(name: "IMClientTests", dependencies: ["IMClient", "IMServer", "IMCore", "HookbotTestSupport"]),
        .executableTarget(
            name: "tom-and-jerry-example", dependencies: ["IMClient", "IMServer", "IMCore"], path: "examples/TomAndJerry",
            exclude: ["README.md"]),
        .executableTarget(
            name: "custom-types-example",
            dependencies: [
                "IMClient", "IMCore", "BotHost", "BotHub", "HookRuntime",
                .logging,
            ],
            path: "examples/CustomTypes",
            exclude: ["plugins", "README.md"]
        ),
        .testTarget(
            name: "ProtobufTests",
            dependencies: [
                "IMCore", "IMProto", "IMServer", "IMSignatures", "HookbotTestSupport",
                .swiftProtobuf, .hummingbird, .hummingbirdWSClient, .nioCore, .nioPosix,
            ]
        ),
        .testTarget(
            name: "IMServerTests",
            dependencies: [
                "IMCore", "IMServer", "IMSignatures", "HookbotTestSupport", "MediaImaging", "CVips",
                .hummingbirdWSClient, .grdb, .grdbSQLite,
            ]
        ),
    ]
)
