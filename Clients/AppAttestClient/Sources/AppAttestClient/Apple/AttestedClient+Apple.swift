#if canImport(DeviceCheck) && canImport(Security)
    import Foundation

    extension AttestedClient {
        /// The client for an app: `DCAppAttestService`, the key ID in the Keychain (one item per
        /// gateway host), DeviceCheck tokens, `URLSession.shared`.
        public init(gateway: URL, appID: String? = nil, configuration: Configuration = Configuration()) {
            self.init(
                gateway: gateway,
                appID: appID,
                service: DeviceCheckAppAttestService(),
                keyStore: KeychainKeyStore(account: gateway.host ?? gateway.absoluteString),
                deviceCheck: DeviceCheckDeviceTokenProvider(),
                transport: URLSessionTransport(),
                configuration: configuration
            )
        }
    }
#endif
