// swift-tools-version:6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    // Release builds: the hot paths cross module walls, so let the optimizer see across them
    // (inlining and specialization as inside one module), and do not check exclusivity at run
    // time. A stored property read from another module gets a dynamic check that its
    // `@exclusivity(unchecked)` does not switch off there: ~1,000 instructions a proxied request
    // (callgrind, docs/design-notes.md "Walls the compiler keeps"). Debug builds, which run
    // every test, keep the checks.
    .unsafeFlags(["-cross-module-optimization", "-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "attest-gateway",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "attest-gateway", targets: ["attest-gateway"]),
        // For Benchmarks/ (its own package, which depends on this one by path).
        .library(name: "HTTP1", targets: ["HTTP1"]),
        .library(name: "Verification", targets: ["Verification"]),
        .library(name: "Simulator", targets: ["Simulator"]),
    ],
    targets: [
        // MARK: - System libraries: module.modulemap + shim.h only
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        .systemLibrary(
            // No pkgConfig: hiredis.pc adds -D_FILE_OFFSET_BITS=64, which SwiftPM rejects.
            name: "CHiredis",
            providers: [.apt(["libhiredis-dev"]), .brew(["hiredis"])]
        ),
        .systemLibrary(
            name: "CYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"]), .brew(["libyaml"])]
        ),
        .systemLibrary(
            // HTTP/2 framing, HPACK and flow control for the server side (`HTTPProxy/HTTP2`).
            name: "CNGHTTP2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"]), .brew(["libnghttp2"])]
        ),
        .systemLibrary(
            // JOSE: JWE A256KW + A256GCM for Play Integrity classic tokens
            // (`Verification/PlayIntegrity/JOSEDecryption.swift`) and the simulator's encryption.
            name: "CJOSE",
            pkgConfig: "cjose",
            providers: [.apt(["libcjose-dev", "libjansson-dev"]), .brew(["cjose"])]
        ),
        // Real C: epoll/accept4 wrappers that Glibc does not export to Swift.
        .target(
            name: "CGatewayShims",
            cSettings: [.define("_GNU_SOURCE")]
        ),

        // MARK: - Libraries
        .target(
            // HTTP/1.1 parsers and head writers: the standard library and Glibc only, so the
            // compiler keeps gateway code out (the fuzz harness compiles these files alone).
            name: "HTTP1",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Verification",
            dependencies: ["COpenSSL", "CJOSE"],
            swiftSettings: swiftSettings
        ),
        .target(
            // Development only: mints App Attest objects under a test CA.
            name: "Simulator",
            dependencies: ["Verification", "COpenSSL", "CJOSE"],
            swiftSettings: swiftSettings
        ),
        // The gateway, bottom to top: a target imports only targets above it in this list, so
        // the compiler keeps the walls (ARCHITECTURE.md draws the graph).
        .target(
            // Event loops, sockets, byte transports (plain, TLS), limits, logging, the metrics
            // registry: everything a connection of any kind needs, and nothing about HTTP policy.
            name: "GatewayIO",
            dependencies: ["Verification", "COpenSSL", "CGatewayShims"],
            swiftSettings: swiftSettings
        ),
        .target(
            // The outbound HTTPS/1.1 client on the loops, service-neutral: connections (a state
            // machine), requests and answers as values, retry policy, breaker, token bucket, the
            // https origin parser, metrics and errors named after the peer it talks to.
            name: "OutboundHTTP",
            // Verification: `GoogleEndpoint`'s https URL parser, the one `OutboundOrigin` uses.
            dependencies: ["GatewayIO", "HTTP1", "Verification"],
            swiftSettings: swiftSettings
        ),
        .target(
            // Apple's DeviceCheck and fraud-risk services: JWT, requests and answers as values,
            // `AppleError` (the `apple_*` codes), over OutboundHTTP's client.
            name: "AppleClient",
            dependencies: ["GatewayIO", "HTTP1", "OutboundHTTP", "Verification"],
            swiftSettings: swiftSettings
        ),
        .target(
            // Redis: RESP, connections on the loops, cluster slots and redirects, sentinel.
            name: "RedisClient",
            dependencies: ["GatewayIO", "Verification", "CHiredis"],
            swiftSettings: swiftSettings
        ),
        .target(
            // Google's outbound HTTPS client (OutboundHTTP's, peer `google`) and the Android
            // revocation status list: settings, fetch schedule (a value), the fetcher, the
            // fleet's copy in Redis, the list enrollments read.
            name: "GoogleClient",
            dependencies: ["GatewayIO", "HTTP1", "OutboundHTTP", "RedisClient", "Verification"],
            swiftSettings: swiftSettings
        ),
        .target(
            // policies.yaml to `GatewayPolicy` values: routes, listeners, store and Apple settings, lint.
            name: "PolicyModel",
            dependencies: [
                "GatewayIO", "AppleClient", "GoogleClient", "OutboundHTTP", "RedisClient", "Verification", "CYAML",
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            // The attestation store: keys, counters, challenges, debug tokens (Redis or memory).
            name: "KeyStore",
            dependencies: ["GatewayIO", "AppleClient", "RedisClient", "PolicyModel", "Verification"],
            swiftSettings: swiftSettings
        ),
        .target(
            // What the proxy knows of a gate: the `RequestGate` protocol, decisions, verdicts,
            // identity headers. HTTP1 only: neither the proxy nor the gate reaches the other.
            name: "GateContract",
            dependencies: ["HTTP1", "GatewayIO"],
            swiftSettings: swiftSettings
        ),
        .target(
            // HTTP/1.1 proxy connections, listeners, upstream pools, header rewriting, access log.
            name: "HTTPProxy",
            dependencies: [
                "GateContract", "GatewayIO", "HTTP1", "PolicyModel", "Verification", "CNGHTTP2", "CGatewayShims",
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            // The gate: assertions, attestations, challenges, DeviceCheck, fraud risk, check-only dialects.
            name: "Enforcement",
            dependencies: [
                "AppleClient", "GateContract", "GatewayIO", "GoogleClient", "HTTP1", "KeyStore", "OutboundHTTP",
                "PolicyModel", "RedisClient", "Verification",
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            // The composition root: builds everything from a policy, reloads, signals, admin listener.
            name: "GatewayServe",
            dependencies: [
                "AppleClient", "Enforcement", "GateContract", "GatewayIO", "GoogleClient", "HTTP1", "HTTPProxy",
                "KeyStore", "OutboundHTTP", "PolicyModel", "RedisClient", "Verification", "CHiredis", "CYAML",
            ],
            swiftSettings: swiftSettings
        ),

        .target(
            // Test support shared by the tests and the fuzz harnesses (as HummingbirdTesting):
            // the reference request-head writer, PassthroughGate, parser probes, array forms; and,
            // for both the unit and the integration tests, the gate's and the store's test
            // doubles and the one `eventually`. Not linked into the gateway.
            name: "GatewayTesting",
            dependencies: [
                "Enforcement", "GateContract", "GatewayIO", "HTTPProxy", "KeyStore", "PolicyModel", "RedisClient",
                "HTTP1",
                "Simulator", "Verification",
                // The in-memory pipe's eventfd (Glibc does not export eventfd(2)).
                "CGatewayShims",
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: - Executable
        .executableTarget(
            name: "attest-gateway",
            dependencies: [
                "GatewayServe", "Enforcement", "HTTPProxy", "KeyStore", "PolicyModel", "RedisClient", "AppleClient",
                "GoogleClient", "OutboundHTTP",
                "GateContract", "GatewayIO", "Verification", "Simulator",
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: - libFuzzer targets (Fuzz/<name>/run.sh builds them with -sanitize=fuzzer through
        // Fuzz/lib.sh; a plain build makes replayers that run the files they are given)
        .target(name: "FuzzSupport", path: "Fuzz/Support", swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-android-key-description", dependencies: ["FuzzSupport", "Verification"],
            path: "Fuzz/android-key-description", exclude: ["run.sh"],
            sources: ["FuzzAndroidKeyDescription.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-base64", dependencies: ["FuzzSupport", "GatewayIO", "Verification"], path: "Fuzz/base64",
            exclude: ["run.sh", "seeds"], sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            // HTTPCacheControl.maxAge: the Cache-Control header of Google's status list answer.
            name: "fuzz-cache-control", dependencies: ["FuzzSupport", "GoogleClient"], path: "Fuzz/cache-control",
            exclude: ["cache-control.dict", "run.sh", "seeds"], sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-correlation",
            dependencies: ["FuzzSupport", "HTTPProxy", "GateContract", "PolicyModel", "GatewayIO", "HTTP1"],
            path: "Fuzz/correlation", exclude: ["correlation.dict", "run.sh", "seeds"],
            sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-http-parser", dependencies: ["FuzzSupport", "GatewayTesting", "HTTP1"],
            path: "Fuzz/http-parser", exclude: ["http.dict", "regressions", "run.sh", "seeds"],
            sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-jwt", dependencies: ["FuzzSupport", "Verification"], path: "Fuzz/jwt",
            exclude: ["jwt.dict", "run.sh", "seeds"], sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-h2-request-mapping", dependencies: ["FuzzSupport", "GatewayTesting", "HTTPProxy", "HTTP1"],
            path: "Fuzz/h2-request-mapping", exclude: ["h2.dict", "regressions", "run.sh", "seeds"],
            sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-policy", dependencies: ["FuzzSupport", "PolicyModel", "GatewayIO"], path: "Fuzz/policy",
            exclude: ["policy.dict", "regressions", "run.sh", "seeds"], sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-play-integrity", dependencies: ["FuzzSupport", "Verification"], path: "Fuzz/play-integrity",
            exclude: ["play-integrity.dict", "run.sh", "seeds"], sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-proxy-protocol", dependencies: ["FuzzSupport", "GatewayIO", "GatewayTesting"],
            path: "Fuzz/proxy-protocol", exclude: ["proxy-protocol.dict", "regressions", "run.sh", "seeds"],
            sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-receipt", dependencies: ["FuzzSupport", "Verification"], path: "Fuzz/receipt",
            exclude: ["run.sh"], sources: ["FuzzReceipt.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-request-rules", dependencies: ["FuzzSupport", "Enforcement", "GateContract", "HTTP1"],
            path: "Fuzz/request-rules", exclude: ["request-rules.dict", "run.sh", "seeds"],
            sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            // AndroidRevocationSharedCopy: the revocation list's copy in Redis (header + JSON).
            name: "fuzz-revocation-share", dependencies: ["FuzzSupport", "GoogleClient"],
            path: "Fuzz/revocation-share", exclude: ["revocation-share.dict", "run.sh", "seeds"],
            sources: ["harness.swift", "main.swift"],
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "fuzz-verification", dependencies: ["FuzzSupport", "Verification"], path: "Fuzz/verification",
            exclude: ["run.sh"], sources: ["FuzzVerification.swift", "main.swift"],
            swiftSettings: swiftSettings),

        // MARK: - Tests (Swift Testing)
        .testTarget(
            name: "VerificationTests",
            dependencies: ["Verification", "Simulator"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            // Pure: no sockets, no child processes, no sleeps or wall-clock bounds. Runs in
            // parallel (`make check`).
            name: "GatewayUnitTests",
            dependencies: [
                "GatewayServe", "Enforcement", "HTTPProxy", "KeyStore", "PolicyModel", "RedisClient", "AppleClient",
                "GoogleClient", "OutboundHTTP",
                "GateContract", "GatewayIO", "GatewayTesting", "HTTP1", "Verification", "Simulator",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            // Loopback sockets, redis-server, the Python upstreams, openssl, the built binary, and
            // bounded latencies: run serially (`make test`).
            name: "GatewayIntegrationTests",
            dependencies: [
                "GatewayServe", "Enforcement", "HTTPProxy", "KeyStore", "PolicyModel", "RedisClient", "AppleClient",
                "GoogleClient", "OutboundHTTP",
                "GateContract", "GatewayIO", "GatewayTesting", "HTTP1", "Verification", "Simulator",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["GatewayTesting", "Simulator", "Verification"],
            swiftSettings: swiftSettings
        ),
    ]
)
