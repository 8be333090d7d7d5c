internal import CHiredis
internal import COpenSSL
internal import CYAML

/// What this build is: the gateway's version and the C libraries it runs on (read at run time,
/// since Debian updates them under an unchanged binary). `attest-gateway --version` prints it,
/// and `attest_gateway_build_info` exports it.
package enum GatewayVersion {
    /// Bumped with each release (semantic versioning).
    package static let version = "0.14.0"

    /// `OpenSSL 3.0.17 1 Jul 2025`, as the loaded libssl reports itself.
    package static var openSSL: String { String(cString: OpenSSL_version(OPENSSL_VERSION)) }

    /// `0.14.1`: the hiredis headers this build was compiled against (hiredis has no run-time query).
    package static var hiredis: String { "\(HIREDIS_MAJOR).\(HIREDIS_MINOR).\(HIREDIS_PATCH)" }

    /// `0.2.5`, as the loaded libyaml reports itself.
    package static var libyaml: String { String(cString: yaml_get_version_string()) }

    /// One line: `attest-gateway 0.14.0 (OpenSSL 3.0.17 1 Jul 2025; hiredis 0.14.1; libyaml 0.2.5)`.
    package static var line: String {
        "attest-gateway \(Self.version) (\(Self.openSSL); hiredis \(Self.hiredis); libyaml \(Self.libyaml))"
    }
}
