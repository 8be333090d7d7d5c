// swift-tools-version:6.2
// Measuring programs, kept out of the gateway's own `swift build`. They use the gateway package
// by path, through its library products:
//   verify-bench  `make bench-verify` (scripts/bench-verify.sh): verification throughput
//   bench-mint    `make bench`'s enforced route (scripts/bench-enforced.sh): pre-mints simulator
//                 keys and assertions
//   http-bench    scripts/bench-http.sh: CPU time per operation of the HTTP/1.1 parsers and writers
// Build from the repository root: swift build -c release --package-path Benchmarks
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "attest-gateway-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "attest-gateway", path: "..")
    ],
    targets: [
        .executableTarget(
            name: "verify-bench",
            dependencies: [.product(name: "Verification", package: "attest-gateway")],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "bench-mint",
            dependencies: [
                .product(name: "Simulator", package: "attest-gateway"),
                .product(name: "Verification", package: "attest-gateway"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "http-bench",
            dependencies: [.product(name: "HTTP1", package: "attest-gateway")],
            swiftSettings: swiftSettings
        ),
    ]
)
