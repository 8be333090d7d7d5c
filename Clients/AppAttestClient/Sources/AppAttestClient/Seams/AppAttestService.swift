import Foundation

/// The device's App Attest service: what `DCAppAttestService` offers, behind a protocol so
/// that the client runs on Linux in tests (with a simulator) and on devices (with
/// `DeviceCheckAppAttestService`, under `#if canImport(DeviceCheck)`).
///
/// Implementations throw `AppAttestServiceError` for the failures the client acts on
/// (`invalidKey`, `serverUnavailable`, `featureUnsupported`); anything else is passed on to the
/// app as `AttestedClientError.appAttestFailed`.
public protocol AppAttestService: Sendable {
    /// Whether this device and app can use App Attest (false in the Simulator, in most app
    /// extensions, and on hardware without a Secure Enclave).
    var isSupported: Bool { get }

    /// Creates a key pair in the Secure Enclave; returns its key ID (standard base64 of
    /// SHA256 of the public key). Local: no network.
    func generateKey() async throws -> String

    /// Asks Apple to certify the key over `clientDataHash`; returns the attestation object.
    /// A call to Apple's servers, rate-limited per app: the client makes it once per key.
    func attestKey(_ keyID: String, clientDataHash: Data) async throws -> Data

    /// Signs `clientDataHash` with the key; returns the assertion object. Local; every call
    /// increments the key's counter.
    func generateAssertion(_ keyID: String, clientDataHash: Data) async throws -> Data
}

/// The failures of an `AppAttestService` that the client handles (`DCError` codes).
public struct AppAttestServiceError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Kind: String, Hashable, Sendable {
        /// `DCError.invalidKey`: the key is unusable (gone after a restore or migration, or
        /// not attestable). The client discards it and enrolls a new one, once per request.
        case invalidKey
        /// `DCError.serverUnavailable`: Apple's attestation service could not be reached.
        /// The client retries later with the same key, with backoff.
        case serverUnavailable
        /// `DCError.featureUnsupported`: App Attest is not available here.
        case featureUnsupported
        /// `DCError.invalidInput`: a bad key ID or client data hash (a client bug).
        case invalidInput
        /// `DCError.unknownSystemFailure` or anything else.
        case unknownSystemFailure
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String = "") {
        self.kind = kind
        self.message = message
    }

    public var description: String { "AppAttestServiceError.\(self.kind.rawValue): \(self.message)" }
}
