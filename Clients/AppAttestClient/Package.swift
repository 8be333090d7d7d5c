// swift-tools-version:6.2
import PackageDescription

// The app's side of attest-gateway. No dependencies: Foundation only (and DeviceCheck /
// Security on Apple platforms, behind `#if canImport`). Linux is supported for the tests,
// which drive a real gateway with the `attest-gateway sim` CLI as the App Attest service.
let package = Package(
    name: "AppAttestClient",
    platforms: [
        .iOS(.v16),
        .macOS(.v14),
        .tvOS(.v16),
        .watchOS(.v9),
        .visionOS(.v1),
    ],
    products: [
        .library(name: "AppAttestClient", targets: ["AppAttestClient"])
    ],
    targets: [
        .target(
            name: "AppAttestClient",
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ]
        ),
        .testTarget(
            name: "AppAttestClientTests",
            dependencies: ["AppAttestClient"],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ]
        ),
    ]
)
