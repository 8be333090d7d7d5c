import Foundation
import Simulator
import Verification

// `attest-gateway sim ...`: the development-only App Attest simulator. State lives in --dir
// (see SimulatorDirectory); these commands only parse arguments and print JSON.

enum SimInitCommand: Subcommand {
    static let name = "sim init"
    static let summary = "create (or reuse) the simulator's test CA in DIR, print its root PEM path"
    static let usage = """
        usage: attest-gateway sim init --dir DIR
          Creates root_ca.pem (+ attestation CA, receipt CA, receipt signer and keys) in DIR, or keeps the
          ones already there. Name root_ca.pem under trust_roots to let a development gateway trust it.
        Prints {"root_ca":"<path of the PEM>"}.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try CommandLineArguments(words, valued: ["dir"])
        if args.wantsHelp {
            print(self.usage)
            return 0
        }
        try rejectPositionals(args)
        let directory = SimulatorDirectory(path: absolutePath(try args.required("dir")))
        try directory.authority()
        printJSON([("root_ca", jsonQuote(directory.rootCertificatePath))])
        return 0
    }
}

enum SimAttestCommand: Subcommand {
    static let name = "sim attest"
    static let summary = "generate a simulated device key and mint its attestation object"
    static let usage = """
        usage: attest-gateway sim attest --dir DIR --app-id ID (--challenge TEXT | --client-data-hash B64) [--environment development|production]
            [--key-id B64] [--validation-category N] [--bundle-version TEXT] [--key-access-policy POSTURE]
          --challenge TEXT         clientDataHash = SHA256(UTF-8 TEXT), what the app does with a gateway challenge
          --client-data-hash B64   the exact clientDataHash bytes
          --environment            AAGUID and receipt environment (default development)
          --key-id B64             attest this existing simulated key again (as attestKey on a key that
                                   generateKey made earlier) instead of generating a new one
          --validation-category N  write apple_validation_category_01 = N (iOS 27 launch validation;
                                   4 App Store, 2 TestFlight, 3 development: docs/protocol.md)
          --bundle-version TEXT    write apple_bundle_version_01 = TEXT
          --key-access-policy POSTURE  write the macOS 27 key access-control extension (OID
                                   1.2.840.113635.100.8.6): macos_full_security (Full Security, SIP on)
                                   or reduced (another blob)
        The device key is kept in DIR/keys. Prints {"key_id","attestation","public_key"} (base64).
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try CommandLineArguments(
            words,
            valued: [
                "dir", "app-id", "challenge", "client-data-hash", "environment", "key-id", "validation-category",
                "bundle-version", "key-access-policy",
            ])
        if args.wantsHelp {
            print(self.usage)
            return 0
        }
        try rejectPositionals(args)
        let dir = try args.required("dir")
        let appID = try args.required("app-id")
        let clientDataHash: [UInt8]
        switch (try args.value("challenge"), try args.base64("client-data-hash")) {
        case (let challenge?, nil): clientDataHash = SHA256.hash(Array(challenge.utf8))
        case (nil, let hash?): clientDataHash = hash
        default: throw UsageError("give exactly one of --challenge and --client-data-hash")
        }
        let environmentText = try args.value("environment") ?? "development"
        guard let environment = AppAttestEnvironment(rawValue: environmentText) else {
            throw UsageError("--environment must be development or production, not \(environmentText)")
        }

        let directory = SimulatorDirectory(path: absolutePath(dir))
        let authority = try directory.authority()
        let existing = try args.base64("key-id")
        let device = try existing.map { try directory.device(keyID: $0) } ?? directory.createDevice()
        var options = AttestationOptions()
        options.launchValidation = try launchValidationArguments(args)
        switch try args.value("key-access-policy") {
        case nil: break
        case "macos_full_security": options.keyAccessPolicyBlob = KeyAccessPolicyBlob.macOSFullSecurity
        case "reduced": options.keyAccessPolicyBlob = KeyAccessPolicyBlob.reducedSecurity
        case let other?: throw UsageError("--key-access-policy must be macos_full_security or reduced, not \(other)")
        }
        let attestation = try authority.attestation(
            for: device, appID: appID, clientDataHash: clientDataHash, environment: environment, options: options)
        printJSON([
            ("key_id", jsonQuote(encodeBase64(device.keyID))),
            ("attestation", jsonQuote(encodeBase64(attestation))),
            ("public_key", jsonQuote(encodeBase64(device.publicKey))),
        ])
        return 0
    }
}

enum SimAssertCommand: Subcommand {
    static let name = "sim assert"
    static let summary = "sign an assertion with a simulated device key"
    static let usage = """
        usage: attest-gateway sim assert --dir DIR --key-id B64 --app-id ID (--client-data B64 | --client-data-hash B64) [--counter N]
            [--validation-category N] [--bundle-version TEXT]
          --client-data B64        the client data; clientDataHash = SHA256(it)
          --client-data-hash B64   the exact clientDataHash bytes
          --counter N              signCount to use (default: the key's last counter + 1, kept in DIR)
          --validation-category N  write apple_validation_category_01 = N (iOS 27 launch validation;
                                   4 App Store, 2 TestFlight, 3 development: docs/protocol.md)
          --bundle-version TEXT    write apple_bundle_version_01 = TEXT
        Prints {"assertion":"<base64>","counter":N}.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try CommandLineArguments(
            words,
            valued: [
                "dir", "key-id", "app-id", "client-data", "client-data-hash", "counter", "validation-category",
                "bundle-version",
            ])
        if args.wantsHelp {
            print(self.usage)
            return 0
        }
        try rejectPositionals(args)
        let dir = try args.required("dir")
        let keyID = try args.requiredBase64("key-id")
        let appID = try args.required("app-id")
        let clientDataHash: [UInt8]
        switch (try args.base64("client-data"), try args.base64("client-data-hash")) {
        case (let data?, nil): clientDataHash = SHA256.hash(data)
        case (nil, let hash?): clientDataHash = hash
        default: throw UsageError("give exactly one of --client-data and --client-data-hash")
        }
        var requested: UInt32?
        if let text = try args.value("counter") {
            guard let value = UInt32(text) else { throw UsageError("--counter must be 0...4294967295, not \(text)") }
            requested = value
        }

        let directory = SimulatorDirectory(path: absolutePath(dir))
        let device = try directory.device(keyID: keyID)
        let counter = try directory.nextCounter(keyID: keyID, requested: requested)
        var options = AssertionOptions()
        options.launchValidation = try launchValidationArguments(args)
        let assertion = try device.assertion(
            clientDataHash: clientDataHash, appID: appID, counter: counter, options: options)
        printJSON([
            ("assertion", jsonQuote(encodeBase64(assertion))),
            ("counter", String(counter)),
        ])
        return 0
    }
}

/// `--validation-category N` and `--bundle-version TEXT` (either, both or neither).
private func launchValidationArguments(_ args: CommandLineArguments) throws(UsageError) -> LaunchValidation {
    var validation = LaunchValidation()
    if let text = try args.value("validation-category") {
        guard let value = UInt32(text) else {
            throw UsageError("--validation-category must be 0...4294967295, not \(text)")
        }
        validation.category = value
    }
    validation.bundleVersion = try args.value("bundle-version")
    return validation
}

private func rejectPositionals(_ args: CommandLineArguments) throws(UsageError) {
    if let first = args.positionals.first { throw UsageError("unexpected argument \(first)") }
}

private func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    return (FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path)
}
