/// The App Attest environment a key was attested in, as read from the AAGUID.
public enum AppAttestEnvironment: String, Sendable, Hashable, CaseIterable {
    case production
    case development

    /// AAGUID "appattestdevelop".
    static let developmentAAGUID: [UInt8] = Array("appattestdevelop".utf8)
    /// AAGUID "appattest" followed by seven zero bytes.
    static let productionAAGUID: [UInt8] = Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)

    /// The environment an AAGUID names, or nil for any other value.
    public init?(aaguid: [UInt8]) {
        if aaguid == Self.productionAAGUID {
            self = .production
        } else if aaguid == Self.developmentAAGUID {
            self = .development
        } else {
            return nil
        }
    }

    public var aaguid: [UInt8] {
        switch self {
        case .production: return Self.productionAAGUID
        case .development: return Self.developmentAAGUID
        }
    }
}
