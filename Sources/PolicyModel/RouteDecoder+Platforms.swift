/// `routes[i].platforms`: which platforms' keys a route accepts.
extension RouteDecoder {
    /// The platforms the policy configures: `ios` with `app_ids`, `android` with `android.apps`.
    var configuredPlatforms: [AttestPlatform] {
        (self.appIDs.isEmpty ? [] : [.ios]) + (self.androidPackages.isEmpty ? [] : [.android])
    }

    /// The listed platforms (each configured, none twice), or every platform when the key is
    /// absent: a platform the policy does not configure has no keys to present (an Android key
    /// enrolled under an earlier policy is refused by its package, `app_id_mismatch`).
    func decodePlatforms(_ fields: Fields) throws(PolicyError) -> [AttestPlatform] {
        let configured = self.configuredPlatforms
        guard let node = fields["platforms"] else { return AttestPlatform.allCases }
        let items = try self.reader.list(node, expected: "a list of platforms (ios, android)")
        guard !items.isEmpty else {
            throw self.reader.error(
                .invalidValue, node, "expected at least one platform (leave platforms out to accept every one)")
        }
        var platforms: [AttestPlatform] = []
        for item in items {
            let platform: AttestPlatform = try self.reader.oneOf(item)
            guard !platforms.contains(platform) else {
                throw self.reader.error(.invalidValue, item, "\(platform.rawValue) is listed twice")
            }
            guard configured.contains(platform) else {
                let needs = platform == .ios ? "app_ids" : "an android: block with apps"
                throw self.reader.error(
                    .invalidValue, item, "platform \(platform.rawValue) needs \(needs) at the top level")
            }
            platforms.append(platform)
        }
        return platforms
    }
}
