import Foundation
import Simulator
import Verification

// `verify-android-attestation` and the Android `sim` commands: argument parsing and JSON
// output only; the checks are Verification's (`AndroidAttestationChainVerifier`,
// `AndroidKeyRequirements`), the chains the Simulator's (`SimulatedAndroidAuthority`).

enum VerifyAndroidAttestationCommand: Subcommand {
    static let name = "verify-android-attestation"
    static let summary = "verify an Android Key Attestation chain against a challenge and an app, print a JSON verdict"
    static let usage = """
        usage: attest-gateway verify-android-attestation --chain FILE --challenge TEXT --package NAME --digest HEX \
        [--digest HEX ...] [--extra-root PEMFILE ...] [--security-level strongbox|trusted_environment|software] \
        [--allow-unlocked] [--allow-unverified-boot] [--min-patch-level YYYYMM] [--revocation-list FILE] [--at ISO8601]

          --chain FILE             the chain, leaf first: PEM certificates, or one base64 DER certificate per line
          --challenge TEXT         the attestation challenge the app used (its UTF-8 bytes)
          --package NAME           the accepted application ID
          --digest HEX             an accepted signing-certificate SHA-256 (64 hex digits, ':' allowed); repeatable
          --extra-root PEMFILE     a trust anchor besides Google's pinned roots; repeatable
          --security-level LEVEL   the lowest accepted level (default trusted_environment)
          --allow-unlocked         accept an unlocked bootloader
          --allow-unverified-boot  accept a verifiedBootState other than Verified
          --min-patch-level N      the lowest osPatchLevel (YYYYMM)
          --revocation-list FILE   Google's revocation status list (the JSON of
                                   https://android.googleapis.com/attestation/status); without it no
                                   certificate's revocation is checked, and stderr says so
          --at ISO8601             verification time (default now)

        stdout: {"valid":true,"key_id":…,"package":…,"security_level":…,"attestation_version":N,"google_root":BOOL,"public_key":…,"revocation_entries":N|null}
            or  {"valid":false,"error":"<code>","message":"…","revocation_entries":N|null}   exit 0 valid, 1 invalid, 2 usage error
            revocation_entries: the serials on --revocation-list, null when none was given
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try CommandLineArguments(
            words,
            valued: [
                "chain", "challenge", "package", "digest", "extra-root", "security-level", "min-patch-level", "at",
                "revocation-list",
            ],
            switches: ["allow-unlocked", "allow-unverified-boot"])
        if args.wantsHelp {
            print(self.usage)
            return 0
        }
        guard args.positionals.isEmpty else { throw UsageError("unexpected argument \(args.positionals[0])") }
        let chain = try Self.readChain(try args.required("chain"))
        let challenge = Array(try args.required("challenge").utf8)
        let package = try args.required("package")
        var digests: [[UInt8]] = []
        for text in args.values("digest") {
            guard let digest = Self.hexDigest(text) else { throw UsageError("--digest \(text) is not 64 hex digits") }
            digests.append(digest)
        }
        guard !digests.isEmpty else { throw UsageError("missing --digest") }
        let level: AndroidSecurityLevel
        switch try args.value("security-level") ?? "trusted_environment" {
        case "strongbox": level = .strongBox
        case "trusted_environment": level = .trustedEnvironment
        case "software": level = .software
        case let other:
            throw UsageError("--security-level \(other): expected strongbox, trusted_environment or software")
        }
        var minimumPatch: Int? = nil
        if let text = try args.value("min-patch-level") {
            guard let value = Int(text), (201_001...209_912).contains(value) else {
                throw UsageError("--min-patch-level \(text) is not YYYYMM")
            }
            minimumPatch = value
        }
        let roots = try args.values("extra-root").map { path throws(UsageError) in
            guard let data = FileManager.default.contents(atPath: path) else {
                throw UsageError("cannot read --extra-root \(path)")
            }
            return String(decoding: data, as: UTF8.self)
        }
        let time = try args.date("at") ?? Date()
        let revocationList = try Self.readRevocationList(try args.value("revocation-list"))
        let revocationEntries = revocationList.map { String($0.entries.count) } ?? "null"
        if revocationList == nil {
            printError(
                "verify-android-attestation: no --revocation-list given: no certificate of the chain was checked against Google's revocation status list"
            )
        }
        let requirements = AndroidKeyRequirements(apps: [
            AndroidAppRequirement(
                packageName: package, signingDigests: digests, minimumSecurityLevel: level,
                requiresLockedBootloader: !args.has("allow-unlocked"),
                requiresVerifiedBoot: !args.has("allow-unverified-boot"), minimumPatchLevel: minimumPatch)
        ])
        let verifier: AndroidAttestationChainVerifier
        do {
            verifier = try AndroidAttestationChainVerifier(
                additionalTrustAnchorsPEM: roots, allowsSoftwareAttestation: level == .software)
        } catch {
            throw UsageError("cannot use the roots given: \(error.reason)")
        }
        do {
            let result = try verifier.verify(chain: chain, at: time, revocationList: revocationList ?? .empty)
            let app = try requirements.check(result, challenge: challenge)
            let spki = result.leafPublicKey.subjectPublicKeyInfo
            printJSON([
                ("valid", "true"),
                ("key_id", jsonQuote(encodeBase64(SHA256.hash(spki)))),
                ("package", jsonQuote(app.packageName)),
                ("security_level", jsonQuote(result.keyDescription.attestationSecurityLevel.description)),
                ("attestation_version", String(result.keyDescription.attestationVersion)),
                ("google_root", result.isGoogleRoot ? "true" : "false"),
                ("public_key", jsonQuote(encodeBase64(result.leafPublicKey.p256Point ?? spki))),
                ("revocation_entries", revocationEntries),
            ])
            return 0
        } catch {
            printJSON([
                ("valid", "false"), ("error", jsonQuote(error.code.rawValue)), ("message", jsonQuote(error.reason)),
                ("revocation_entries", revocationEntries),
            ])
            return 1
        }
    }

    /// `--revocation-list FILE`: Google's status list JSON (bounded by
    /// `AndroidRevocationList.maximumSize`); nil when the option is absent.
    static func readRevocationList(_ path: String?) throws(UsageError) -> AndroidRevocationList? {
        guard let path else { return nil }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let size = (attributes[.size] as? NSNumber)?.intValue, size <= AndroidRevocationList.maximumSize,
            let data = FileManager.default.contents(atPath: path)
        else {
            throw UsageError(
                "cannot read --revocation-list \(path) (or it is over \(AndroidRevocationList.maximumSize) bytes)")
        }
        do throws(AndroidAttestationError) {
            return try AndroidRevocationList(json: [UInt8](data))
        } catch {
            throw UsageError("--revocation-list \(path): \(error.reason) (\(error.code.rawValue))")
        }
    }

    /// PEM certificates, or base64 DER lines (blank lines and `#` comments skipped).
    static func readChain(_ path: String) throws(UsageError) -> [[UInt8]] {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 1 << 20 else {
            throw UsageError("cannot read --chain \(path) (or it is over 1 MiB)")
        }
        let text = String(decoding: data, as: UTF8.self)
        var chain: [[UInt8]] = []
        if text.contains("-----BEGIN CERTIFICATE-----") {
            var rest = Substring(text)
            while let begin = rest.range(of: "-----BEGIN CERTIFICATE-----") {
                guard let end = rest[begin.upperBound...].range(of: "-----END CERTIFICATE-----") else {
                    throw UsageError("--chain \(path): a PEM block has no END line")
                }
                guard
                    let der = decodeBase64(String(rest[begin.upperBound..<end.lowerBound]).filter { !$0.isWhitespace })
                else { throw UsageError("--chain \(path): a PEM block is not base64") }
                chain.append(der)
                rest = rest[end.upperBound...]
            }
        } else {
            for line in text.split(whereSeparator: \.isNewline) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                guard !trimmed.isEmpty, !trimmed.hasPrefix("#") else { continue }
                guard let der = decodeBase64(trimmed) else {
                    throw UsageError("--chain \(path): a line is neither PEM nor base64")
                }
                chain.append(der)
            }
        }
        guard !chain.isEmpty else { throw UsageError("--chain \(path) holds no certificate") }
        return chain
    }

    static func hexDigest(_ text: String) -> [UInt8]? {
        let hex = Array(text.filter { $0 != ":" }.utf8)
        guard hex.count == 64 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 64, by: 2) {
            guard let byte = UInt8(String(decoding: hex[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        return bytes
    }
}

enum SimAndroidEnrollCommand: Subcommand {
    static let name = "sim android-enroll"
    static let summary = "mint a simulated Android Keystore key and its attestation chain under DIR's test root"
    static let usage = """
        usage: attest-gateway sim android-enroll --dir DIR --challenge TEXT [--package NAME] [--digest HEX]
            [--security-level software|trusted_environment|strongbox] [--unlocked] [--boot-state verified|self_signed|unverified]
            [--patch-level YYYYMM] [--attestation-version N] [--imported]
          Creates the Android test root in DIR on first use (DIR/android_root.pem: list it under
          android.trust_anchors). Defaults are a good key: com.example.app signed by the simulator's
          digest, TEE, locked, Verified boot. The key and chain are kept in DIR/android_keys.
        Prints {"key_id","root","signing_digest","chain":[base64 DER…],"body":"<the enrollment JSON>"}.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try CommandLineArguments(
            words,
            valued: [
                "dir", "challenge", "package", "digest", "security-level", "boot-state", "patch-level",
                "attestation-version",
            ],
            switches: ["unlocked", "imported"])
        if args.wantsHelp {
            print(self.usage)
            return 0
        }
        guard args.positionals.isEmpty else { throw UsageError("unexpected argument \(args.positionals[0])") }
        let directory = (try args.required("dir") as NSString).standardizingPath
        let authority = try AndroidSimulatorFiles.authority(directory)
        let challenge = try args.required("challenge")
        var options = AndroidAttestationOptions()
        if let package = try args.value("package") { options.packageName = package }
        if let text = try args.value("digest") {
            guard let digest = VerifyAndroidAttestationCommand.hexDigest(text) else {
                throw UsageError("--digest \(text) is not 64 hex digits")
            }
            options.signingDigests = [digest]
        }
        switch try args.value("security-level") ?? "trusted_environment" {
        case "software": options.securityLevel = 0
        case "trusted_environment": options.securityLevel = 1
        case "strongbox": options.securityLevel = 2
        case let other:
            throw UsageError("--security-level \(other): expected software, trusted_environment or strongbox")
        }
        options.deviceLocked = !args.has("unlocked")
        switch try args.value("boot-state") ?? (args.has("unlocked") ? "unverified" : "verified") {
        case "verified": options.verifiedBootState = 0
        case "self_signed": options.verifiedBootState = 1
        case "unverified": options.verifiedBootState = 2
        case let other: throw UsageError("--boot-state \(other): expected verified, self_signed or unverified")
        }
        if let text = try args.value("patch-level") {
            guard let value = Int(text) else { throw UsageError("--patch-level \(text) is not a number") }
            options.osPatchLevel = value
        }
        if let text = try args.value("attestation-version") {
            guard let value = Int(text), value > 0 else { throw UsageError("--attestation-version \(text)") }
            options.attestationVersion = value
        }
        if args.has("imported") { options.origin = 2 }
        let key = try authority.generateKey(challenge: Array(challenge.utf8), options: options)
        try AndroidSimulatorFiles.save(key, directory)
        let chain = key.chain.map { jsonQuote(encodeBase64($0)) }.joined(separator: ",")
        let body =
            #"{"platform":"android","challenge":"# + jsonQuote(challenge) + #","certificate_chain":["# + chain
            + "]}"
        printJSON([
            ("key_id", jsonQuote(key.keyID)),
            ("root", jsonQuote(AndroidSimulatorFiles.rootPath(directory))),
            ("signing_digest", jsonQuote(options.signingDigests[0].hexString)),
            ("chain", "[" + chain + "]"),
            ("body", jsonQuote(body)),
        ])
        return 0
    }
}

enum SimAndroidSignCommand: Subcommand {
    static let name = "sim android-sign"
    static let summary = "sign a request with a simulated Android key (X-App-Assertion of the Android protocol)"
    static let usage = """
        usage: attest-gateway sim android-sign --dir DIR --key-id B64 --counter N
            (--method M --target T [--body TEXT] [--challenge TEXT] | --client-data B64)
          Signs "attest-gateway-android-v1" || counter (8 bytes BE) || SHA256(clientData) with the key
          `sim android-enroll` made (docs/protocol.md section 8). clientData is the `binding: request`
          one of --method, --target, --body and --challenge, or --client-data's bytes as given (any
          binding: `head`'s, `body`'s, or a deliberately wrong one).
        Prints {"key_id","assertion","counter"}.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try CommandLineArguments(
            words, valued: ["dir", "key-id", "method", "target", "counter", "body", "challenge", "client-data"])
        if args.wantsHelp {
            print(self.usage)
            return 0
        }
        guard args.positionals.isEmpty else { throw UsageError("unexpected argument \(args.positionals[0])") }
        let directory = (try args.required("dir") as NSString).standardizingPath
        let keyID = try args.required("key-id")
        let key = try AndroidSimulatorFiles.load(keyID, directory)
        guard let counter = UInt64(try args.required("counter")), counter > 0 else {
            throw UsageError("--counter must be a positive integer")
        }
        let clientData: [UInt8]
        if let given = try args.value("client-data") {
            for name in ["method", "target", "body", "challenge"] {
                if try args.value(name) != nil { throw UsageError("--client-data and --\(name) exclude each other") }
            }
            guard let bytes = decodeBase64(given) else { throw UsageError("--client-data is not base64") }
            clientData = bytes
        } else {
            let body = Array((try args.value("body") ?? "").utf8)
            let digest = SHA256.hash(body).hexString
            clientData = Array(
                "appattest-v1\n\(try args.required("method"))\n\(try args.required("target"))\n\(digest)\n\(try args.value("challenge") ?? "")"
                    .utf8)
        }
        let assertion = try key.assertion(clientDataHash: SHA256.hash(clientData), counter: counter)
        printJSON([
            ("key_id", jsonQuote(keyID)), ("assertion", jsonQuote(encodeBase64(assertion))),
            ("counter", String(counter)),
        ])
        return 0
    }
}

/// The Android simulator's files in `sim --dir`: the authority, and each key as PEM + chain.
enum AndroidSimulatorFiles {
    static func rootPath(_ directory: String) -> String {
        (directory as NSString).appendingPathComponent(SimulatedAndroidAuthority.FileName.rootCertificate)
    }

    static func authority(_ directory: String) throws -> SimulatedAndroidAuthority {
        if FileManager.default.fileExists(atPath: Self.rootPath(directory)) {
            return try SimulatedAndroidAuthority.load(directory: directory)
        }
        let authority = try SimulatedAndroidAuthority.generate()
        try authority.save(directory: directory)
        return authority
    }

    private static func keyPath(_ keyID: String, _ directory: String) throws(UsageError) -> String {
        guard let bytes = decodeBase64(keyID), bytes.count == 32 else {
            throw UsageError("--key-id is not the base64 of a 32-byte key ID")
        }
        return (directory as NSString).appendingPathComponent("android_keys/\(bytes.hexString)")
    }

    static func save(_ key: SimulatedAndroidKey, _ directory: String) throws {
        let path = try Self.keyPath(key.keyID, directory)
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let chain = key.chain.map { encodeBase64($0) }.joined(separator: "\n")
        guard
            FileManager.default.createFile(
                atPath: path + ".key.pem", contents: Data(key.privateKeyPEM.utf8),
                attributes: [.posixPermissions: 0o600]),
            FileManager.default.createFile(atPath: path + ".chain", contents: Data((chain + "\n").utf8))
        else { throw UsageError("cannot write the key to \(path)") }
    }

    static func load(_ keyID: String, _ directory: String) throws -> SimulatedAndroidKey {
        let path = try Self.keyPath(keyID, directory)
        guard let pem = FileManager.default.contents(atPath: path + ".key.pem") else {
            throw UsageError("no simulated Android key \(keyID) in \(directory) (run sim android-enroll)")
        }
        let chain = try VerifyAndroidAttestationCommand.readChain(path + ".chain")
        return try SimulatedAndroidKey(privateKeyPEM: String(decoding: pem, as: UTF8.self), chain: chain)
    }
}
