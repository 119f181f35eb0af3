// swift-tools-version: 6.2
import PackageDescription

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
        .target(name: "IMSignatures", dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        // Prometheus metrics: one registry per server process, reached through swift-metrics factories.
        .target(
            name: "Telemetry",
            dependencies: [
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // LeanCloud's protobuf wire format (generated from proto/ by scripts/generate-proto.sh) and its
        // codec; kept out of IMCore so that clients and the Lua runtime do not need SwiftProtobuf.
        .target(
            name: "IMProto",
            dependencies: ["IMCore", .product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
        .target(
            name: "IMServer",
            dependencies: [
                "IMCore", "IMProto", "IMSignatures", "Telemetry", "MediaImaging", "PushProviders",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "IMClient",
            dependencies: [
                "IMCore", "IMSignatures",
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // Media uploads and downloads over HTTP (MediaTransfer.swift), files read and written without blocking.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
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
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                // HMAC of card buttons (Card.swift)
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            // The Lua prelude every plugin state runs first (Prelude.swift finds it beside the binary).
            resources: [.copy("Resources/prelude.lua")]
        ),
        .target(
            name: "BotHost",
            dependencies: [
                "IMCore", "IMClient", "HookRuntime", "BotRouting", "HookbotConfig", "PushProviders",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The browser console (static page in Resources/) and the admin HTTP API it uses.
        .target(
            name: "Console",
            dependencies: [
                "BotHost", "HookRuntime", "IMServer", "IMCore", "IMSignatures", "Telemetry",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [.copy("Resources")]
        ),
        .executableTarget(
            name: "hookbot",
            dependencies: [
                "IMCore", "IMServer", "IMClient", "HookRuntime", "BotHost", "BotHub", "PluginTester", "Console", "Telemetry", "Benchmarks",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A server and its bot in one process (`hookbot run` without `--server`): the only bot module that
        // links the server.
        .target(
            name: "BotHub",
            dependencies: ["BotHost", "IMClient", "IMCore", "IMServer", .product(name: "Logging", package: "swift-log")]
        ),
        // The benchmark workloads of `hookbot bench` (hook dispatch, ping-pong, moderation, fan-out, RSS, media):
        // only the command-line tool links them.
        .target(
            name: "Benchmarks",
            dependencies: [
                "BotHost", "BotHub", "HookRuntime", "IMClient", "IMCore", "IMServer", "MediaImaging", "CVips", "PushProviders",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),
        // hookbot.toml: TOML (TOMLKit) into JSON values, with errors that name file, line and key.
        .target(
            name: "HookbotConfig",
            dependencies: ["IMCore", .product(name: "TOMLKit", package: "TOMLKit")]
        ),
        // The routing core a running bot and `hookbot test` share: no transport, no server.
        .target(
            name: "BotRouting",
            dependencies: ["HookRuntime", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "PluginTester",
            dependencies: ["HookRuntime", "BotRouting", .product(name: "Logging", package: "swift-log")]
        ),
        // Fuzz targets (libFuzzer): `make fuzz` builds them with coverage, AddressSanitizer and -DFUZZING and
        // runs each for a bounded time; a normal build makes them replay files (`fuzz-json-command crash-…`).
        .target(name: "FuzzSupport", path: "Fuzz/Support"),
        .executableTarget(name: "fuzz-json-command", dependencies: ["FuzzSupport", "IMCore"], path: "Fuzz/JSONCommand"),
        .executableTarget(
            name: "fuzz-protobuf-command", dependencies: ["FuzzSupport", "IMCore", "IMProto"], path: "Fuzz/ProtobufCommand"),
        .executableTarget(name: "fuzz-toml-config", dependencies: ["FuzzSupport", "HookbotConfig"], path: "Fuzz/TOMLConfig"),
        .testTarget(name: "PluginTesterTests", dependencies: ["PluginTester", "HookRuntime", "HookbotTestSupport"]),
        .testTarget(name: "IMCoreTests", dependencies: ["IMCore"]),
        .testTarget(name: "MediaImagingTests", dependencies: ["MediaImaging", "CVips"]),
        .testTarget(name: "HookRuntimeTests", dependencies: ["HookRuntime"]),
        .target(
            name: "HookbotTestSupport",
            dependencies: [
                "IMClient", "IMServer", "IMCore", "IMSignatures",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            path: "Tests/Support"),
        .testTarget(
            name: "BotHostTests",
            dependencies: [
                "BotHost", "BotHub", "IMCore", "IMServer", "IMClient", "HookRuntime", "HookbotTestSupport", "PushProviders",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]),
        .testTarget(
            name: "ConsoleTests",
            dependencies: [
                "Console", "BotHost", "BotHub", "IMServer", "IMCore", "IMClient", "HookRuntime", "Telemetry", "HookbotTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // Offline push (issue 27): the provider clients (APNs, FCM HTTP v1, Web Push, UnifiedPush, webhook) over one
        // shared HTTP client; what to push and to whom comes later.
        .target(
            name: "PushProviders",
            dependencies: [
                "IMCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .testTarget(
            name: "PushProvidersTests",
            dependencies: [
                "PushProviders", "IMCore", "HookbotTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
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
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "examples/CustomTypes",
            exclude: ["plugins", "README.md"]
        ),
        .testTarget(
            name: "ProtobufTests",
            dependencies: [
                "IMCore", "IMProto", "IMServer", "IMSignatures", "HookbotTestSupport",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "IMServerTests",
            dependencies: [
                "IMCore", "IMServer", "IMSignatures", "HookbotTestSupport", "MediaImaging", "CVips",
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
    ]
)
