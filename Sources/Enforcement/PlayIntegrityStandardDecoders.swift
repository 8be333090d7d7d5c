package import Foundation
import PolicyModel
import Synchronization

/// The standard decoders of the gateway's apps, kept across policy reloads: a reload with the
/// same `play_integrity:` settings for an app keeps its decoder, so that its day's budget and
/// its access token survive (a changed block starts a new budget). GatewayServe holds one and
/// hands it to every gate it builds.
package final class PlayIntegrityStandardDecoders: Sendable {
    private let transport: (any PlayIntegrityGoogleTransport)?
    private let now: @Sendable () -> Date
    private let decoders = Mutex<[String: PlayIntegrityStandardDecoder]>([:])

    /// - Parameter transport: the outbound client to Google; nil (tools) = every standard
    ///   token is refused `play_integrity_unavailable`.
    package init(transport: (any PlayIntegrityGoogleTransport)?, now: @escaping @Sendable () -> Date = { Date() }) {
        self.transport = transport
        self.now = now
    }

    /// The decoder of `packageName` under `settings`, reused when the settings did not change.
    func decoder(packageName: String, settings: PlayIntegrityStandardSettings) -> PlayIntegrityStandardDecoder? {
        guard let transport = self.transport else { return nil }
        return self.decoders.withLock { decoders in
            if let existing = decoders[packageName], existing.settings == settings { return existing }
            let decoder = PlayIntegrityStandardDecoder(
                packageName: packageName, settings: settings, transport: transport, now: self.now)
            decoders[packageName] = decoder
            return decoder
        }
    }
}
