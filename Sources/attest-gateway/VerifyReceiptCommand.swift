import Foundation
import Verification

/// `attest-gateway verify-receipt`: verifies one App Attest receipt and prints a JSON verdict.
enum VerifyReceiptCommand: Subcommand {
    static let name = "verify-receipt"
    static let summary = "verify an App Attest receipt (PKCS#7, Apple Root CA - G3), print JSON"
    static let usage = """
        usage: attest-gateway verify-receipt --receipt B64 [--app-id ID] [--public-key B64] [--at ISO8601] [--root-ca PEMFILE]
          --receipt B64      the receipt (attStmt.receipt or a refreshed one), standard base64
          --app-id ID        require field 2 (App ID) to be ID
          --public-key B64   require the attested certificate's key to be this X9.62 point (65 bytes;
                             a base64 DER SubjectPublicKeyInfo or a PEM key are accepted too)
          --at ISO8601       verify the chain at this time (default: the receipt's creation time)
          --root-ca PEMFILE  trust this root too, besides the pinned Apple Root CA - G3 (development)
        Prints {"valid":true,"type",...} and exits 0, or {"valid":false,"error","message"} and exits 1.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try CommandLineArguments(
            words, valued: ["receipt", "app-id", "public-key", "at", "root-ca"])
        if args.wantsHelp {
            print(self.usage)
            return 0
        }
        guard args.positionals.isEmpty else { throw UsageError("unexpected argument \(args.positionals[0])") }
        let receipt = try args.requiredBase64("receipt")
        let appID = try args.value("app-id")
        let publicKey = try Self.publicKeyPoint(try args.value("public-key"))
        let time = try args.date("at")
        var roots: [String] = []
        if let path = try args.value("root-ca") {
            guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw UsageError("cannot read --root-ca file \(path)")
            }
            roots.append(pem)
        }

        do {
            let verifier = try ReceiptVerifier(additionalTrustRootsPEM: roots)
            let parsed = try verifier.verify(receipt: receipt, appID: appID, publicKey: publicKey, at: time)
            printJSON([
                ("valid", "true"),
                ("type", jsonQuote(parsed.type.rawValue)),
                ("app_id", jsonQuote(parsed.appID)),
                ("environment", jsonQuote(parsed.environment)),
                ("token", jsonQuote(parsed.token)),
                ("client_hash", jsonQuote(encodeBase64(parsed.clientHash))),
                ("risk_metric", parsed.riskMetric.map(String.init) ?? "null"),
                ("created_at", jsonQuote(RFC3339.format(parsed.creationTime))),
                ("not_before", parsed.notBefore.map { jsonQuote(RFC3339.format($0)) } ?? "null"),
                ("expires_at", jsonQuote(RFC3339.format(parsed.expirationTime))),
            ])
            return 0
        } catch {
            printJSON([
                ("valid", "false"),
                ("error", jsonQuote(error.code.rawValue)),
                ("message", jsonQuote(error.reason)),
            ])
            return 1
        }
    }

    /// The X9.62 point from `--public-key`: base64 of the 65-byte point (the contract), and, for
    /// convenience, base64 of a DER SubjectPublicKeyInfo or a PEM public key. Anything else is
    /// passed on as is, for the verifier to reject as `invalid_public_key`.
    static func publicKeyPoint(_ text: String?) throws(UsageError) -> [UInt8]? {
        guard let text else { return nil }
        if text.contains("-----BEGIN") {
            guard let key = try? ECPublicKey(pem: text) else { throw UsageError("--public-key is not a P-256 PEM key") }
            return key.x962
        }
        guard let bytes = decodeBase64(text) else { throw UsageError("--public-key is not valid base64") }
        if bytes.count != 65, bytes.first == 0x30, let key = try? ECPublicKey(pem: Self.pem(bytes)) {
            return key.x962
        }
        return bytes
    }

    private static func pem(_ der: [UInt8]) -> String {
        "-----BEGIN PUBLIC KEY-----\n" + encodeBase64(der) + "\n-----END PUBLIC KEY-----\n"
    }
}
