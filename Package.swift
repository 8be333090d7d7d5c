// swift-tools-version:6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
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
            dependencies: ["COpenSSL"],
            swiftSettings: swiftSettings
        ),
        .target(
            // Development only: mints App Attest objects under a test CA.
            name: "Simulator",
            dependencies: ["Verification", "COpenSSL"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "Gateway",
            dependencies: ["HTTP1", "Verification", "COpenSSL", "CHiredis", "CYAML", "CGatewayShims"],
            swiftSettings: swiftSettings
        ),

        .target(
            // Test support shared by the tests and the fuzz harnesses (as HummingbirdTesting):
            // the reference request-head writer, PassthroughGate, parser probes, array forms.
            // Not linked into the gateway.
            name: "GatewayTesting",
            dependencies: ["Gateway", "HTTP1"],
            swiftSettings: swiftSettings
        ),

        // MARK: - Executable
        .executableTarget(
            name: "attest-gateway",
            dependencies: ["Gateway", "Verification", "Simulator"],
            swiftSettings: swiftSettings
        ),

        // MARK: - Tests (Swift Testing)
        .testTarget(
            name: "VerificationTests",
            dependencies: ["Verification", "Simulator"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: ["Gateway", "GatewayTesting", "HTTP1", "Verification", "Simulator"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["Simulator", "Verification"],
            swiftSettings: swiftSettings
        ),
    ]
)
