public import OutboundHTTP

/// The `apple:` block of policies.yaml: credentials and settings for Apple's DeviceCheck and
/// fraud-risk servers. Decoded and checked at load (`PolicyDecoder+Apple`); `AppleServices`
/// builds the client, the DeviceCheck calls and the fraud-risk refresher from it.
public struct AppleConfiguration: Sendable, Hashable {
    /// `team_id`: 10 characters, upper-case letters and digits (the JWT's `iss`).
    public var teamID: String
    /// `key_id`: 10 characters, upper-case letters and digits (the JWT's `kid`).
    public var keyID: String
    /// `private_key_file`: the `.p8` (PKCS#8 P-256), resolved against the policy file's
    /// directory. Checked at load (readable, PKCS#8, P-256); read again at start and reload.
    public var privateKeyFile: String
    /// `environment`: DeviceCheck's server set; default the policy's `environment` (required
    /// when that is `any`). Fraud-risk refreshes follow each key's own environment instead.
    public var environment: AppleEnvironment
    /// `devicecheck_url`: replaces DeviceCheck's host and port for both environments.
    public var deviceCheckOverride: OutboundOrigin?
    /// `attest_data_url`: replaces the fraud-risk host and port for both environments.
    public var attestDataOverride: OutboundOrigin?
    /// `ca_file`: PEM roots trusted for Apple's endpoints instead of the system store (a local
    /// fake or an egress proxy that terminates TLS); nil = the system's roots.
    public var caFile: String?
    public var deviceCheck: AppleDeviceCheckSettings
    public var fraudRisk: AppleFraudRiskSettings

    public init(
        teamID: String,
        keyID: String,
        privateKeyFile: String,
        environment: AppleEnvironment,
        deviceCheckOverride: OutboundOrigin? = nil,
        attestDataOverride: OutboundOrigin? = nil,
        caFile: String? = nil,
        deviceCheck: AppleDeviceCheckSettings = AppleDeviceCheckSettings(),
        fraudRisk: AppleFraudRiskSettings = AppleFraudRiskSettings()
    ) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKeyFile = privateKeyFile
        self.environment = environment
        self.deviceCheckOverride = deviceCheckOverride
        self.attestDataOverride = attestDataOverride
        self.caFile = caFile
        self.deviceCheck = deviceCheck
        self.fraudRisk = fraudRisk
    }
}
