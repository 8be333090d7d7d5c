/// The steps between `connect(2)` and the first application byte of an outbound socket:
/// the connect's outcome (SO_ERROR), then, with TLS, the client handshake. No readiness of
/// its own: the owner calls `advance` on each event, whichever way it watches the socket
/// (an `EventLoop`'s epoll, or Dispatch sources off the loops), and does what it answers.
package struct OutboundHandshake {
    package enum Phase: Equatable, Sendable {
        case connecting
        case handshaking
        case open
        case failed
    }

    package enum Step {
        /// Not yet: wait for the next event (`writable`: ask for writability too).
        case wait(writable: Bool)
        /// The connect completed: put this session on the socket in place of the plain
        /// transport, then call `advance` again (the handshake starts there).
        case upgrade(TLSTransport)
        /// Application bytes can flow.
        case open
        /// The socket cannot be used: close it with this reason.
        case failed(OutboundCloseReason)
    }

    package private(set) var phase: Phase = .connecting
    private let tls: OutboundTLS?

    package init(tls: OutboundTLS?) {
        self.tls = tls
    }

    /// The connect finished at once and no handshake follows: open without an event.
    package mutating func connectedAtOnce() -> Bool {
        guard self.phase == .connecting, self.tls == nil else { return false }
        self.phase = .open
        return true
    }

    /// One event on the socket. `connectFinished`: the event proves a connect ended (which
    /// events do is the owner's call: epoll and Dispatch report a failed connect differently);
    /// SO_ERROR is read on every event while connecting, so a failure is never missed.
    package mutating func advance(_ transport: any ByteTransport, connectFinished: Bool) -> Step {
        switch self.phase {
        case .connecting:
            let error = SystemCalls.socketError(transport.fd)
            if error != 0 {
                self.phase = .failed
                return .failed(.connectFailed(IOError("connect", errno: error)))
            }
            guard connectFinished else { return .wait(writable: true) }
            guard let tls = self.tls else {
                self.phase = .open
                return .open
            }
            do throws(TransportError) {
                let session = try tls.transport(for: transport.fd)
                self.phase = .handshaking
                return .upgrade(session)
            } catch {
                self.phase = .failed
                return .failed(.tlsFailed(error, verification: nil))
            }
        case .handshaking:
            guard let session = transport as? TLSTransport else {
                preconditionFailure("a TLS handshake without the TLS transport on the socket")
            }
            do throws(TransportError) {
                guard try session.handshake() else { return .wait(writable: session.waitsForWritable) }
            } catch {
                self.phase = .failed
                return .failed(.tlsFailed(error, verification: session.verificationFailure))
            }
            self.phase = .open
            return .open
        case .open:
            return .open
        case .failed:
            return .wait(writable: false)
        }
    }
}
