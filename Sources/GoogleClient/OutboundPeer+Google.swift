public import OutboundHTTP

extension OutboundPeer {
    /// Google's servers (the Android revocation status list, Play Integrity's
    /// `decodeIntegrityToken`, its OAuth token endpoint): metrics `attest_gateway_google_*`, codes
    /// `google_*` (`google_unreachable`, `google_timeout`, …).
    public static let google = OutboundPeer(name: "google", displayName: "Google")
}
