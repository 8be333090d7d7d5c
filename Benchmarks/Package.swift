// swift-tools-version:6.2
// Measuring programs, kept out of the gateway's own `swift build`. They use the gateway package
// by path, through its library products:
//   verify-bench  `make bench-verify` (scripts/bench-verify.sh): verification throughput
//   bench-mint    `make bench`'s enforced route (scripts/bench-enforced.sh): pre-mints simulator
//                 keys and assertions
//   http-bench    scripts/bench-http.sh: CPU time per operation of the HTTP/1.1 parsers and writers
// Build from the repository root: swift build -c release --package-path Benchmarks
import Foundation
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// verify-bench's Android modes time the gateway's own verifiers (AndroidAttestationChainVerifier,
// AndroidRequestSignature, AndroidKeyRequirements), which are `package` declarations: visible
// to a module compiled with the gateway's package name. SwiftPM derives that name from the
// package's identity, the name of its directory (this folder's parent), lower-cased, with each
// character that cannot be in an identifier turned into `_`. Only verify-bench gets it.
let gatewayPackageName: String = {
    let directory = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().lastPathComponent
    let mapped = String(directory.lowercased().map { $0.isLetter || $0.isNumber || $0 == "_" ? $0 : "_" })
    return mapped.first?.isNumber == true ? "_" + mapped : mapped
}()

let package = Package(
    name: "attest-gateway-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "attest-gateway", path: "..")
    ],
    targets: [
        .executableTarget(
            name: "verify-bench",
            dependencies: [
                .product(name: "Simulator", package: "attest-gateway"),
                .product(name: "Verification", package: "attest-gateway"),
            ],
            swiftSettings: swiftSettings + [.unsafeFlags(["-package-name", gatewayPackageName])]
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
