/// Which environments a verifier accepts.
public enum EnvironmentRequirement: String, Sendable, Hashable, CaseIterable {
    case production
    case development
    case any

    public func allows(_ environment: AppAttestEnvironment) -> Bool {
        switch self {
        case .any: return true
        case .production: return environment == .production
        case .development: return environment == .development
        }
    }
}
