import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension AttestedClient {
    /// Request headers of the protocol (docs/protocol.md).
    public enum Header {
        public static let keyID = "X-App-Attest-Key-Id"
        public static let assertion = "X-App-Assertion"
        public static let challenge = "X-App-Attest-Challenge"
        public static let debugToken = "X-App-Attest-Debug-Token"
        /// The gateway DeviceCheck token (fallback routes, devices without App Attest).
        public static let deviceCheckToken = "X-App-Attest-Token"

        /// `request` without any protocol header the caller may have set: only the client
        /// decides which credential a request carries.
        static func stripped(_ request: URLRequest) -> URLRequest {
            var copy = request
            for name in [keyID, assertion, challenge, debugToken, deviceCheckToken] {
                copy.setValue(nil, forHTTPHeaderField: name)
            }
            return copy
        }
    }
}
