import Foundation
import GoogleClient
import Verification

/// Decodes the `android:` block:
///
/// ```yaml
/// android:
///   apps:
///     - package: com.example.app
///       signing_digests: ["AB:CD:…" or 64 hex digits or base64 of 32 bytes]
///       security_level: trusted_environment   # strongbox | software
///       require_locked_bootloader: true
///       require_verified_boot: true
///       min_patch_level: 202601               # YYYYMM, optional
///       play_integrity: {decryption_keys: [...], verification_keys: [...]}  # optional
///   trust_anchors: [extra-root.pem]           # optional, relative to the policy file
///   revocation: {url: …, refresh: 1h, max_age: 24h, on_stale: refuse}   # or off; AndroidRevocationDecoder
/// ```
///
/// Every error names the file, line and field (`PolicyError`).
struct AndroidPolicyDecoder {
    static let keys = ["apps", "trust_anchors", "revocation"]
    static let appKeys = [
        "package", "signing_digests", "security_level", "require_locked_bootloader", "require_verified_boot",
        "min_patch_level", "play_integrity",
    ]
    /// Bounds: a policy lists a handful of apps and signers.
    static let maximumApps = 100
    static let maximumDigests = 16

    let reader: PolicyScalarReader
    let files: PolicyFilePath

    func decode(_ top: Fields) throws(PolicyError) -> AndroidPolicy? {
        guard let node = top["android"] else { return nil }
        let fields = try self.reader.mapping(node, keys: Self.keys)
        guard let appsNode = fields["apps"] else {
            throw self.reader.error(
                .missingKey, node.mark, fields.path("apps"),
                "required: apps: [{package: com.example.app, signing_digests: [...]}]")
        }
        let items = try self.reader.list(appsNode, expected: "a list of Android apps")
        guard !items.isEmpty, items.count <= Self.maximumApps else {
            throw self.reader.error(
                .invalidValue, appsNode, "expected 1 to \(Self.maximumApps) Android apps; found \(items.count)")
        }
        var apps: [AndroidAppPolicy] = []
        for item in items {
            let app = try self.decodeApp(item)
            guard !apps.contains(where: { $0.packageName == app.packageName }) else {
                throw self.reader.error(
                    .invalidValue, item, "package \(PolicyScalarReader.quote(app.packageName)) is listed twice")
            }
            apps.append(app)
        }
        var policy = AndroidPolicy(apps: apps, revocation: .google)
        if let revocationNode = fields["revocation"] {
            policy.revocation = try AndroidRevocationDecoder(reader: self.reader, files: self.files).decode(
                revocationNode)
        }
        if let anchorsNode = fields["trust_anchors"] {
            for anchor in try self.reader.list(anchorsNode, expected: "a list of PEM file paths") {
                let path = try self.files.readableFile(anchor, what: "Android trust anchor")
                let pem: String
                do {
                    pem = try String(contentsOfFile: path, encoding: .utf8)
                } catch {
                    throw self.reader.error(.trustRootUnreadable, anchor, "cannot read \(path): \(error)")
                }
                if case .failure(let problem) = TrustRootFile.countCertificates(pem: pem) {
                    throw self.reader.error(
                        .trustRootNotCertificate, anchor,
                        "expected a PEM file of X.509 certificates; \(path) \(problem.text)")
                }
                policy.trustAnchorFiles.append(path)
                policy.trustAnchorsPEM.append(pem)
            }
        }
        return policy
    }

    private func decodeApp(_ node: YAMLNode) throws(PolicyError) -> AndroidAppPolicy {
        let fields = try self.reader.mapping(node, keys: Self.appKeys)
        guard let packageNode = fields["package"] else {
            throw self.reader.error(.missingKey, node.mark, fields.path("package"), "required: the application ID")
        }
        let name = try self.reader.string(packageNode, expected: "an Android application ID (com.example.app)")
        guard Self.isPackageName(name) else {
            throw self.reader.error(
                .invalidValue, packageNode,
                "expected an Android application ID: two or more dot-separated segments of letters, digits and _, each starting with a letter; found \(PolicyScalarReader.quote(name))"
            )
        }
        guard let digestsNode = fields["signing_digests"] else {
            throw self.reader.error(
                .missingKey, node.mark, fields.path("signing_digests"),
                "required: the SHA-256 digests of the app's signing certificates (apksigner verify --print-certs)")
        }
        let digestItems = try self.reader.list(digestsNode, expected: "a list of SHA-256 digests")
        guard !digestItems.isEmpty, digestItems.count <= Self.maximumDigests else {
            throw self.reader.error(
                .invalidValue, digestsNode, "expected 1 to \(Self.maximumDigests) digests; found \(digestItems.count)")
        }
        var digests: [[UInt8]] = []
        for item in digestItems {
            let text = try self.reader.string(item, expected: "a SHA-256 digest")
            guard let digest = Self.digest(text) else {
                throw self.reader.error(
                    .invalidValue, item,
                    "expected a SHA-256 digest: 64 hex digits (colons allowed) or the base64 of 32 bytes; found \(PolicyScalarReader.quote(text))"
                )
            }
            if !digests.contains(digest) { digests.append(digest) }
        }
        var app = AndroidAppPolicy(packageName: name, signingDigests: digests)
        if let n = fields["security_level"] { app.securityLevel = try self.reader.oneOf(n) }
        if let n = fields["require_locked_bootloader"] { app.requireLockedBootloader = try self.reader.bool(n) }
        if let n = fields["require_verified_boot"] { app.requireVerifiedBoot = try self.reader.bool(n) }
        if let n = fields["min_patch_level"] {
            let value = try self.reader.integer(n, in: 201_001...209_912)
            guard (1...12).contains(value % 100) else {
                throw self.reader.error(.invalidValue, n, "expected YYYYMM with a month 01-12; found \(value)")
            }
            app.minimumPatchLevel = value
        }
        if let n = fields["play_integrity"] {
            app.playIntegrity = try self.decodePlayIntegrity(n, packageName: name, signingDigests: digests)
        }
        return app
    }

    /// `apps[i].play_integrity`: the app's package and signing digests are the defaults; a
    /// `package_name` of its own must be the app's (Play signs verdicts for that package).
    private func decodePlayIntegrity(_ node: YAMLNode, packageName: String, signingDigests: [[UInt8]])
        throws(PolicyError) -> PlayIntegrityConfiguration
    {
        let configuration = try PlayIntegrityDecoder(reader: self.reader, files: self.files).decode(
            node, packageName: packageName, certificateDigests: Set(signingDigests))
        if configuration.policy.packageName != packageName {
            let fields = try self.reader.mapping(node, keys: PlayIntegrityDecoder.keys)
            throw self.reader.error(
                .invalidValue, fields["package_name"] ?? node,
                "play_integrity.package_name \(PolicyScalarReader.quote(configuration.policy.packageName)) is not the app's package \(PolicyScalarReader.quote(packageName)); leave it out to use the app's"
            )
        }
        return configuration
    }

    /// `com.example.app`: Android's application ID rule, at most 255 bytes.
    static func isPackageName(_ text: String) -> Bool {
        guard text.utf8.count <= 255 else { return false }
        let segments = text.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count >= 2 else { return false }
        return segments.allSatisfy { segment in
            guard let first = segment.utf8.first, Self.isLetter(first) else { return false }
            return segment.utf8.allSatisfy { Self.isLetter($0) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5f }
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool { (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7a }

    /// 64 hex digits (optionally `:`-separated pairs, any case) or standard/URL-safe base64 of 32 bytes.
    static func digest(_ text: String) -> [UInt8]? {
        let hex = text.filter { $0 != ":" }
        if hex.utf8.count == 64, hex.utf8.allSatisfy({ $0.isHexDigitASCII }) {
            var bytes: [UInt8] = []
            var iterator = hex.utf8.makeIterator()
            while let high = iterator.next(), let low = iterator.next() {
                bytes.append(UInt8(Self.nibble(high) << 4 | Self.nibble(low)))
            }
            return bytes
        }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), data.count == 32 else { return nil }
        return Array(data)
    }

    private static func nibble(_ byte: UInt8) -> Int {
        switch byte {
        case 0x30...0x39: Int(byte - 0x30)
        case 0x61...0x66: Int(byte - 0x61 + 10)
        default: Int(byte - 0x41 + 10)
        }
    }
}

extension UInt8 {
    fileprivate var isHexDigitASCII: Bool {
        (self >= 0x30 && self <= 0x39) || ((self | 0x20) >= 0x61 && (self | 0x20) <= 0x66)
    }
}
