import Foundation
import Testing

extension EndToEnd {
    /// `verify-android-attestation` on the real device chains of `../shared/vectors/android`:
    /// the hardware EC chains of a locked, verified device are valid for their own challenge,
    /// package and signer at their evaluation time; every vector the README rejects is refused
    /// with a code; a wrong package or digest is refused with its own code.
    @Suite struct AndroidCLI {
        static var vectors: URL {
            E2EPaths.repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared/vectors/android")
        }

        struct Vector {
            var name: String
            var expected: [String: Any]
            var keyDescription: [String: Any] { self.expected["key_description"] as? [String: Any] ?? [:] }
            var accepted: Bool {
                ((self.expected["expected_verdict"] as? [String: Any])?["strict"] as? String) == "ACCEPT"
            }
            var at: String { ((self.expected["expected_verdict"] as? [String: Any])?["at"] as? String) ?? "" }
            var challenge: String? { self.keyDescription["attestationChallengeUtf8"] as? String }
            var application: [String: Any] { self.keyDescription["attestationApplicationId"] as? [String: Any] ?? [:] }
            var packages: [String] {
                (self.application["packages"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            }
            var digests: [String] { self.application["signatureDigestsSha256"] as? [String] ?? [] }
            var lockedAndVerified: Bool {
                ((self.expected["policy_signals"] as? [String: Any])?["bootStateVerifiedAndLocked"] as? Bool) == true
            }
            var isEC: Bool {
                let leaf = self.expected["leaf"] as? [String: Any]
                return ((leaf?["publicKey"] as? [String: Any])?["algorithm"] as? String) == "EC"
            }
        }

        static func load() throws -> [Vector] {
            let names = try FileManager.default.contentsOfDirectory(atPath: Self.vectors.path).sorted()
            return try names.compactMap { name in
                let url = Self.vectors.appendingPathComponent("\(name)/expected.json")
                guard FileManager.default.fileExists(atPath: url.path) else { return nil }
                let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any]
                return Vector(name: name, expected: object ?? [:])
            }
        }

        static func verify(_ vector: Vector, world: E2EWorld, package: String? = nil, digest: String? = nil) throws
            -> ToolRun
        {
            var arguments = [
                "verify-android-attestation", "--chain",
                Self.vectors.appendingPathComponent("\(vector.name)/chain.pem").path,
                "--challenge", vector.challenge ?? "unknown", "--package",
                package ?? vector.packages.first ?? "com.example.app",
                "--at", vector.at,
            ]
            for value in digest.map({ [$0] }) ?? vector.digests { arguments += ["--digest", value] }
            if vector.digests.isEmpty && digest == nil { arguments += ["--digest", String(repeating: "0", count: 64)] }
            return try world.runGateway(arguments)
        }

        @Test(.timeLimit(.minutes(2)))
        func realChainsGiveTheirExpectedVerdicts() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let vectors = try Self.load()
            #expect(vectors.count >= 30, "found \(vectors.count) vectors in \(Self.vectors.path)")
            var accepted = 0
            for vector in vectors {
                if vector.accepted && vector.isEC && vector.lockedAndVerified && vector.challenge != nil
                    && vector.packages.count == 1
                {
                    let run = try Self.verify(vector, world: world)
                    #expect(run.status == 0, "\(vector.name): \(run.stdout) \(run.stderr)")
                    #expect(run.stdout.contains(#""valid":true"#), "\(vector.name): \(run.stdout)")
                    accepted += 1
                    let wrongPackage = try Self.verify(vector, world: world, package: "com.example.not.this")
                    #expect(
                        wrongPackage.stdout.contains(#""error":"android_package_mismatch""#), "\(wrongPackage.stdout)")
                    let wrongDigest = try Self.verify(vector, world: world, digest: String(repeating: "ab", count: 32))
                    #expect(
                        wrongDigest.stdout.contains(#""error":"android_signing_digest_mismatch""#),
                        "\(wrongDigest.stdout)")
                } else if !vector.accepted {
                    let run = try Self.verify(vector, world: world)
                    #expect(run.status == 1, "\(vector.name) should be refused: \(run.stdout) \(run.stderr)")
                    #expect(run.stdout.contains(#""valid":false,"error":"android_"#), "\(vector.name): \(run.stdout)")
                }
            }
            #expect(accepted >= 8, "only \(accepted) vectors were checked as valid")
        }
    }
}
