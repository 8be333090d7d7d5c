import Foundation
import Verification

// `verify-attestation` and `verify-assertion`: verify one object given on the command
// line and print exactly one JSON verdict on stdout. Exit 0 valid, 1 invalid, 2 usage.

enum VerifyAttestationCommand: Subcommand {
    static let name = "verify-attestation"
    static let summary = "verify an App Attest attestation object, print a JSON verdict"
    static let usage = """
        usage: attest-gateway verify-attestation --attestation B64 --key-id B64 --app-id ID [--app-id ID ...] \
        (--client-data-hash B64 | --challenge TEXT) [--environment production|development|any] [--at ISO8601] [--root-ca PEMFILE]

          --attestation B64        the attestation object (standard base64)
          --key-id B64             the key ID the app reported (SHA256 of its public key)
          --app-id ID              an accepted App ID (team ID + "." + bundle ID); repeatable
          --client-data-hash B64   the exact bytes the app passed to attestKey (any length)
          --challenge TEXT         or: clientDataHash = SHA256(UTF-8 of TEXT)
          --environment ENV        production | development | any (default any)
          --at ISO8601             verification time (default now)
          --root-ca PEMFILE        an extra trust root besides the pinned Apple root (development); repeatable

        stdout: {"valid":true,"key_id":…,"app_id":…,"environment":…,"public_key":…,"receipt":…,"certificate_not_after":…
                 [,"validation_category":N] [,"bundle_version":"…"]}   (the last two when the device wrote them, iOS 27+)
            or  {"valid":false,"error":"<code>","message":"…"}   exit 0 valid, 1 invalid, 2 usage error
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try CommandLineArguments(
            words,
            valued: [
                "attestation", "key-id", "app-id", "client-data-hash", "challenge", "environment", "at", "root-ca",
            ]
        )
        if args.wantsHelp {
            print(self.usage)
            return 0
        }
        guard args.positionals.isEmpty else { throw UsageError("unexpected argument \(args.positionals[0])") }
        let attestation = try args.requiredBase64("attestation")
        let keyID = try args.requiredBase64("key-id")
        let appIDs = args.values("app-id")
        guard !appIDs.isEmpty else { throw UsageError("missing --app-id") }
        let clientDataHash = try clientDataHashArgument(args, hashOption: "client-data-hash", textOption: "challenge")
        let environment = try environmentArgument(args)
        let time = try args.date("at") ?? Date()
        let extraRoots = try args.values("root-ca").map(readRootFile)

        let verifier: AttestationVerifier
        do {
            verifier = try AttestationVerifier(
                appIDs: appIDs, environment: environment, additionalTrustRootsPEM: extraRoots)
        } catch {
            throw UsageError("cannot use the trust roots given: \(error.reason)")
        }
        do {
            let key = try verifier.verify(
                attestationObject: attestation, keyID: keyID, clientDataHash: clientDataHash, at: time)
            printJSON(
                [
                    ("valid", "true"),
                    ("key_id", jsonQuote(encodeBase64(key.keyID))),
                    ("app_id", jsonQuote(key.appID)),
                    ("environment", jsonQuote(key.environment.rawValue)),
                    ("public_key", jsonQuote(encodeBase64(key.publicKey))),
                    ("receipt", jsonQuote(encodeBase64(key.receipt))),
                    ("certificate_not_after", jsonQuote(formatISO8601(key.certificateNotAfter))),
                ] + launchValidationFields(key.launchValidation)
                    + (key.keyAccessPolicy.map { [("key_access_policy", jsonQuote($0.rawValue))] } ?? []))
            return 0
        } catch {
            printInvalid(error)
            return 1
        }
    }

    private static func environmentArgument(_ args: CommandLineArguments) throws(UsageError) -> EnvironmentRequirement {
        guard let text = try args.value("environment") else { return .any }
        guard let environment = EnvironmentRequirement(rawValue: text) else {
            throw UsageError("--environment must be production, development or any, not \(text)")
        }
        return environment
    }

    private static func readRootFile(_ path: String) throws(UsageError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw UsageError("cannot read --root-ca \(path)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

enum VerifyAssertionCommand: Subcommand {
    static let name = "verify-assertion"
    static let summary = "verify an App Attest assertion, print a JSON verdict"
    static let usage = """
        usage: attest-gateway verify-assertion --assertion B64 --public-key B64 --app-id ID [--app-id ID ...] \
        (--client-data B64 | --client-data-hash B64) --previous-counter N

          --assertion B64          the assertion object (standard base64)
          --public-key B64         the key's 65-byte X9.62 uncompressed point (base64)
          --app-id ID              an App ID the assertion may be for; repeatable
          --client-data B64        the signed client data (its SHA-256 is computed)
          --client-data-hash B64   or: SHA256(client data) directly
          --previous-counter N     the stored counter (0 before the first assertion)

        stdout: {"valid":true,"counter":N[,"validation_category":N][,"bundle_version":"…"]}
            or  {"valid":false,"error":"<code>","message":"…"}
            exit 0 valid, 1 invalid, 2 usage error
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try CommandLineArguments(
            words,
            valued: ["assertion", "public-key", "app-id", "client-data", "client-data-hash", "previous-counter"]
        )
        if args.wantsHelp {
            print(self.usage)
            return 0
        }
        guard args.positionals.isEmpty else { throw UsageError("unexpected argument \(args.positionals[0])") }
        let assertion = try args.requiredBase64("assertion")
        let publicKeyBytes = try args.requiredBase64("public-key")
        let appIDs = args.values("app-id")
        guard !appIDs.isEmpty else { throw UsageError("missing --app-id") }
        let clientDataHash: [UInt8]
        switch (try args.base64("client-data"), try args.base64("client-data-hash")) {
        case (let data?, nil): clientDataHash = SHA256.hash(data)
        case (nil, let hash?): clientDataHash = hash
        case (nil, nil): throw UsageError("missing --client-data or --client-data-hash")
        case (_?, _?): throw UsageError("give --client-data or --client-data-hash, not both")
        }
        let counterText = try args.required("previous-counter")
        guard let previousCounter = UInt32(counterText) else {
            throw UsageError("--previous-counter must be an integer from 0 to \(UInt32.max), not \(counterText)")
        }

        do {
            let key = try ECPublicKey(x962: publicKeyBytes)
            let result = try AssertionVerifier().verify(
                assertionObject: assertion,
                clientDataHash: clientDataHash,
                publicKey: key,
                appIDs: appIDs.map(AppID.init),
                previousCounter: previousCounter
            )
            printJSON(
                [("valid", "true"), ("counter", String(result.counter))]
                    + launchValidationFields(result.launchValidation))
            return 0
        } catch {
            printInvalid(error)
            return 1
        }
    }
}

/// `--client-data-hash B64` or `--challenge TEXT` (SHA256 of its UTF-8), exactly one.
private func clientDataHashArgument(_ args: CommandLineArguments, hashOption: String, textOption: String)
    throws(UsageError) -> [UInt8]
{
    switch (try args.base64(hashOption), try args.value(textOption)) {
    case (let hash?, nil): return hash
    case (nil, let text?): return SHA256.hash(Array(text.utf8))
    case (nil, nil): throw UsageError("missing --\(hashOption) or --\(textOption)")
    case (_?, _?): throw UsageError("give --\(hashOption) or --\(textOption), not both")
    }
}

/// `validation_category` (integer) and `bundle_version` (string), each only when present.
private func launchValidationFields(_ validation: LaunchValidation) -> [(String, String)] {
    var fields: [(String, String)] = []
    if let category = validation.category { fields.append(("validation_category", String(category))) }
    if let version = validation.bundleVersion { fields.append(("bundle_version", jsonQuote(version))) }
    return fields
}

private func printInvalid(_ error: VerificationError) {
    printJSON([
        ("valid", "false"),
        ("error", jsonQuote(error.code.rawValue)),
        ("message", jsonQuote(error.reason)),
    ])
}
