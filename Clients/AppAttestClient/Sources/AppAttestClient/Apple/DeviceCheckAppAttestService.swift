#if canImport(DeviceCheck)
    import DeviceCheck
    import Foundation

    /// `AppAttestService` over `DCAppAttestService.shared` (iOS 14, macOS 11, tvOS 15, watchOS 9,
    /// visionOS 1). `DCError` codes become `AppAttestServiceError` kinds.
    public struct DeviceCheckAppAttestService: AppAttestService {
        public init() {}

        public var isSupported: Bool { DCAppAttestService.shared.isSupported }

        public func generateKey() async throws -> String {
            do {
                return try await DCAppAttestService.shared.generateKey()
            } catch {
                throw Self.map(error)
            }
        }

        public func attestKey(_ keyID: String, clientDataHash: Data) async throws -> Data {
            do {
                return try await DCAppAttestService.shared.attestKey(keyID, clientDataHash: clientDataHash)
            } catch {
                throw Self.map(error)
            }
        }

        public func generateAssertion(_ keyID: String, clientDataHash: Data) async throws -> Data {
            do {
                return try await DCAppAttestService.shared.generateAssertion(keyID, clientDataHash: clientDataHash)
            } catch {
                throw Self.map(error)
            }
        }

        static func map(_ error: any Error) -> AppAttestServiceError {
            guard let error = error as? DCError else {
                return AppAttestServiceError(.unknownSystemFailure, "\(error)")
            }
            switch error.code {
            case .invalidKey: return AppAttestServiceError(.invalidKey, error.localizedDescription)
            case .serverUnavailable: return AppAttestServiceError(.serverUnavailable, error.localizedDescription)
            case .featureUnsupported: return AppAttestServiceError(.featureUnsupported, error.localizedDescription)
            case .invalidInput: return AppAttestServiceError(.invalidInput, error.localizedDescription)
            case .unknownSystemFailure: return AppAttestServiceError(.unknownSystemFailure, error.localizedDescription)
            @unknown default: return AppAttestServiceError(.unknownSystemFailure, error.localizedDescription)
            }
        }
    }

    /// `DeviceCheckTokenProvider` over `DCDevice.current` (iOS 11, macOS 10.15, tvOS 11, watchOS 9).
    public struct DeviceCheckDeviceTokenProvider: DeviceCheckTokenProvider {
        public init() {}

        public var isSupported: Bool { DCDevice.current.isSupported }

        public func generateToken() async throws -> Data {
            try await DCDevice.current.generateToken()
        }
    }
#endif
