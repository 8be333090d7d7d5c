import GoogleClient
import Verification

/// The lint of `android:`: settings that admit keys proving less than a locked, verified
/// device's hardware key, and extra trust anchors (development roots).
extension PolicyLint {
    func androidWarnings(_ policy: GatewayPolicy, top: Fields) -> [PolicyWarning] {
        guard let android = policy.android, let node = top["android"], case .mapping = node.content,
            let fields = try? PolicyScalarReader(file: self.file).mapping(node, keys: AndroidPolicyDecoder.keys),
            let appsNode = fields["apps"], case .sequence(let items) = appsNode.content
        else { return [] }
        var warnings: [PolicyWarning] = []
        func warn(_ code: String, _ node: YAMLNode, _ message: String) {
            warnings.append(
                PolicyWarning(
                    code: code, file: self.file, line: node.mark.line, column: node.mark.column, field: node.path,
                    message: message))
        }
        for (app, item) in zip(android.apps, items) {
            if app.securityLevel == .software {
                warn(
                    "android_software_keys", item,
                    "\(app.packageName) accepts Software Keystore keys, whose attestation key is public: any client can forge one; development only"
                )
            }
            if let standard = app.playIntegrity?.standard, standard.onUnavailable == .allow {
                warn(
                    "android_play_integrity_fail_open", item,
                    "\(app.packageName) enrols keys without a Play Integrity verdict when Google cannot be asked or the day's budget is spent (on_unavailable: allow): such keys are marked unverified"
                )
            }
            if let standard = app.playIntegrity?.standard, standard.apiEndpoint != .playIntegrityAPI {
                warn(
                    "android_play_integrity_api_override", item,
                    "\(app.packageName) sends standard tokens to \(standard.apiEndpoint), not Google's Play Integrity API: tests and egress proxies only"
                )
            }
            if !app.requireLockedBootloader || !app.requireVerifiedBoot {
                warn(
                    "android_boot_state_not_required", item,
                    "\(app.packageName) accepts devices whose bootloader is unlocked or whose OS is not verified: such a device can run an OS that lies to the app"
                )
            }
        }
        if let node = fields["revocation"] {
            if android.revocation == nil {
                warn(
                    "android_revocation_off", node,
                    "revocation: off: a certificate Google revoked (a leaked attestation key) still enrolls; development only"
                )
            } else if android.revocation?.onStale == .allow {
                warn(
                    "android_revocation_on_stale_allow", node,
                    "on_stale: allow: when no list younger than max_age is at hand, enrollments are checked against an old list or none"
                )
            }
        }
        if !android.trustAnchorFiles.isEmpty, let anchors = fields["trust_anchors"] {
            warn(
                "android_extra_trust_anchors", anchors,
                "\(android.trustAnchorFiles.count) extra Android trust anchor(s) besides Google's roots: a test root is for development only"
            )
        }
        return warnings
    }
}
