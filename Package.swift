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
        .executable(name: "attest-gateway", targets: ["attest-gateway"])
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
            dependencies: ["Verification", "COpenSSL", "CHiredis", "CYAML", "CGatewayShims"],
            swiftSettings: swiftSettings
        ),

        // MARK: - Executable
        .executableTarget(
            name: "attest-gateway",
            dependencies: ["Gateway", "Verification", "Simulator"],
            swiftSettings: swiftSettings
        ),

        .executableTarget(
            // Measuring loop for `make bench-verify` (scripts/bench-verify.sh); not shipped.
            name: "verify-bench",
            dependencies: ["Verification"],
            swiftSettings: swiftSettings
        ),

        .executableTarget(
            // Pre-mints simulator keys and assertions for `make bench`'s enforced route
            // (scripts/bench-enforced.sh); development only, not shipped.
            name: "bench-mint",
            dependencies: ["Simulator", "Verification"],
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
            dependencies: ["Gateway", "Verification", "Simulator"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["Simulator", "Verification"],
            swiftSettings: swiftSettings
        ),
    ]
)
