private import CGatewayShims
import Dispatch

/// The session ticket keys of a listener: the first key encrypts new tickets, the others
/// only decrypt (tickets they made are accepted and re-issued under the first).
///
/// Shared by every `SSL_CTX` of a `TLSServerContext` (default and SNI) and, across a reload
/// with in-memory keys, by the old and new contexts, so a reload does not cost every client a
/// full handshake. The keys live in C (`CGatewayShims_ticket_keys`) behind a mutex because
/// OpenSSL reads them in the handshake on any loop's thread while rotation replaces them.
package final class TLSTicketKeyRing: @unchecked Sendable {
    /// Keys kept at most (CGatewayShims_TICKET_KEY_CAPACITY).
    package static let capacity = 8

    let pointer: OpaquePointer
    private let rotationQueue = DispatchQueue(label: "attest-gateway.tls.ticket-rotation")
    /// Touched only on `rotationQueue` (and in init, before it is shared).
    private var keys: [TLSTicketKey]
    private var timer: (any DispatchSourceTimer)?

    /// A ring holding `keys` (at most `capacity`; the first encrypts).
    package init(keys: [TLSTicketKey]) throws(TLSConfigurationError) {
        guard keys.count <= Self.capacity, let pointer = CGatewayShims_ticket_keys_create() else {
            throw TLSConfigurationError(.openSSL, path: "", "cannot create a ticket key ring of \(keys.count) keys")
        }
        self.pointer = pointer
        self.keys = keys
        Self.install(keys, in: pointer)
    }

    deinit {
        self.timer?.cancel()
        CGatewayShims_ticket_keys_destroy(self.pointer)
    }

    /// A ring of one random key that `rotate()`s every `period` (on a private queue, not a loop).
    package static func rotating(every period: Duration) throws(TLSConfigurationError) -> TLSTicketKeyRing {
        guard period > .zero else {
            throw TLSConfigurationError(
                .invalidTicketRotation, path: "", "ticket_rotation must be positive, found \(period)")
        }
        guard let first = TLSTicketKey.random() else {
            throw TLSConfigurationError(.openSSL, path: "", "RAND_bytes failed making a ticket key")
        }
        let ring = try TLSTicketKeyRing(keys: [first])
        let timer = DispatchSource.makeTimerSource(queue: ring.rotationQueue)
        let (seconds, attoseconds) = period.components
        let interval = DispatchTimeInterval.nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .seconds(1))
        timer.setEventHandler { [weak ring] in ring?.rotateOnQueue() }
        ring.timer = timer
        timer.resume()
        return ring
    }

    /// A new random key becomes current; the current one is kept to decrypt (one previous).
    package func rotate() {
        self.rotationQueue.sync { self.rotateOnQueue() }
    }

    /// The keys' names (first 16 bytes), current first: for tests and the reload log.
    package var keyNames: [[UInt8]] {
        self.rotationQueue.sync { self.keys.map { Array($0.bytes.prefix(16)) } }
    }

    private func rotateOnQueue() {
        guard let next = TLSTicketKey.random() else { return }  // keep the old keys rather than none
        self.keys = [next] + self.keys.prefix(1)
        Self.install(self.keys, in: self.pointer)
    }

    private static func install(_ keys: [TLSTicketKey], in pointer: OpaquePointer) {
        let material = keys.flatMap(\.bytes)
        let accepted = material.withUnsafeBytes {
            CGatewayShims_ticket_keys_set(pointer, $0.baseAddress, Int32(keys.count))
        }
        precondition(accepted == 1, "ticket key count \(keys.count) checked against capacity")
    }
}
