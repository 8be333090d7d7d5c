import GatewayIO

/// One HTTPS/1.1 connection of the outbound client to one host, as a value: which step comes
/// next for the request in flight, and what to do with what the socket reported. No I/O: the
/// owner (`OutboundHTTPConnection`) runs the returned `Action`s and reports each outcome back.
///
/// Life of a connection: `idle` (no socket) → `resolving` (DNS, off the loop) → `connecting`
/// (non-blocking connect) → `sending` (the TLS handshake runs inside the first writes) →
/// `receiving` → `ready` (keep-alive, no request) → `sending` again for the next request, or
/// `closed`. One request at a time (HTTP/1.1 without pipelining).
///
/// A request sent on a *reused* connection that the peer closes before the first byte of an
/// answer is sent again once on a fresh connection: the server dropped an idle connection
/// while the request was in flight (RFC 9112 §9.3.1; the client's calls can be repeated:
/// Apple's query, validate, update to the same bits, receipt refresh; Google's reads and token
/// calls). Any other failure ends the request with an `OutboundHTTPError` (its code naming the
/// peer) and closes the connection.
package struct OutboundHTTPConnectionStateMachine: Sendable {
    package enum State: Equatable, Sendable {
        /// No socket.
        case idle
        /// Waiting for the host's address.
        case resolving
        /// Non-blocking connect in progress.
        case connecting
        /// Writing the request (and, on a new connection, running the TLS handshake); `sent`
        /// bytes of it are out.
        case sending(sent: Int)
        /// The request is out; reading the answer.
        case receiving
        /// Connected, no request: kept for the next one.
        case ready
        /// Closed for good (after an error, a close by the peer, or `Connection: close`).
        case closed
    }

    /// What the owner does next.
    package enum Action: Sendable {
        /// Resolve the host off the loop, then report `resolved` or `failed`.
        case resolve
        /// Open a socket and connect to the resolved address, then report `connected`.
        case connect
        /// Write the request's bytes from `offset` (the same bytes again after a
        /// `.wouldBlock`: TLS demands it), then report `wrote`.
        case write(offset: Int)
        /// Wait for the socket (read, or write when the transport says so).
        case wait
        /// The request ended: deliver `result`; `keepConnection` false means close the socket.
        case complete(Result<OutboundHTTPResponse, OutboundHTTPError>, keepConnection: Bool)
        /// Close the socket and start the same request again on a new connection.
        case reconnect
        /// Close an idle connection (closed by the peer, idle timeout, unasked bytes).
        case close
        /// Nothing to do.
        case none
    }

    package private(set) var state: State = .idle
    /// The bytes of the request in flight.
    package private(set) var request: [UInt8] = []
    /// Whether the request in flight went out on a connection that served one before.
    package private(set) var isReused = false
    /// Whether the request in flight was already re-sent once after a stale connection.
    private var wasResent = false
    /// The method of the request in flight (how its answer is framed).
    private var method = "POST"
    private var reader: OutboundResponseReader
    /// What a timeout or failure interrupts, for the error's reason.
    private var phase: String { Self.phase(of: self.state) }

    /// Whom the connection talks to (the errors' codes name it).
    package var peer: OutboundPeer { self.reader.peer }

    package init(peer: OutboundPeer, maximumBodyBytes: Int = OutboundResponseReader.defaultMaximumBodyBytes) {
        self.reader = OutboundResponseReader(peer: peer, maximumBodyBytes: maximumBodyBytes)
    }

    /// True when a new request can start (no socket yet, or an idle keep-alive one).
    package var acceptsRequest: Bool { self.state == .idle || self.state == .ready }

    /// Starts `request` (its bytes; `method` is its request line's). Precondition:
    /// `acceptsRequest`.
    package mutating func start(_ request: [UInt8], method: String = "POST") -> Action {
        precondition(self.acceptsRequest, "one request at a time")
        self.request = request
        self.method = method
        self.wasResent = false
        self.reader.expectResponse(toMethod: method)
        if self.state == .ready {
            self.isReused = true
            self.state = .sending(sent: 0)
            return .write(offset: 0)
        }
        self.isReused = false
        self.state = .resolving
        return .resolve
    }

    /// The host's address is known.
    package mutating func resolved() -> Action {
        guard self.state == .resolving else { return .none }
        self.state = .connecting
        return .connect
    }

    /// The non-blocking connect finished; `errno` is SO_ERROR (0: connected).
    package mutating func connected(errno: Int32) -> Action {
        guard self.state == .connecting else { return .none }
        guard errno == 0 else {
            return self.fail(OutboundHTTPError(.unreachable, peer: self.peer, "\(IOError("connect", errno: errno))"))
        }
        self.state = .sending(sent: 0)
        return .write(offset: 0)
    }

    /// `count` more bytes of the request went out (0 after a `.wouldBlock`).
    package mutating func wrote(_ count: Int) -> Action {
        guard case .sending(let sent) = self.state else { return .none }
        let total = sent + count
        if total >= self.request.count {
            self.state = .receiving
            return .wait
        }
        self.state = .sending(sent: total)
        return count == 0 ? .wait : .write(offset: total)
    }

    /// Bytes read from the connection.
    package mutating func received(_ bytes: [UInt8]) -> Action {
        switch self.state {
        case .sending, .receiving:
            // An answer may come before the whole request is out (the server refusing it early).
            do {
                guard let response = try self.reader.feed(bytes) else { return .wait }
                self.request = []
                if response.isKeepAlive {
                    self.state = .ready
                    return .complete(.success(response), keepConnection: true)
                }
                self.state = .closed
                return .complete(.success(response), keepConnection: false)
            } catch {
                return self.fail(error)
            }
        case .ready:
            // Nothing was asked: a server that talks unasked cannot be trusted with the next request.
            self.state = .closed
            return .close
        case .idle, .resolving, .connecting, .closed:
            return .none
        }
    }

    /// The peer closed its side (read gave end-of-file).
    package mutating func peerClosed() -> Action {
        switch self.state {
        case .sending, .receiving:
            do {
                if let response = try self.reader.peerClosed() {
                    self.state = .closed
                    self.request = []
                    return .complete(.success(response), keepConnection: false)
                }
            } catch {
                return self.fail(error)
            }
            if self.isReused && !self.wasResent {
                // A stale keep-alive connection: once more on a fresh one.
                return self.resend()
            }
            return self.fail(
                OutboundHTTPError(
                    .unreachable, peer: self.peer, "\(self.peer.displayName) closed the connection without an answer"))
        case .ready:
            self.state = .closed
            return .close
        case .idle, .resolving, .connecting, .closed:
            return .none
        }
    }

    /// The transport failed (DNS, socket, TLS). `isTLS`: the TLS layer, not the socket.
    package mutating func failed(_ reason: String, isTLS: Bool = false) -> Action {
        switch self.state {
        case .idle, .closed:
            return .none
        case .ready:
            self.state = .closed
            return .close
        case .resolving, .connecting, .sending, .receiving:
            if self.isReused && !self.wasResent && !isTLS && self.state != .resolving && self.state != .connecting {
                // A reset on a reused connection (EPIPE, ECONNRESET): stale, as a close is.
                return self.resend()
            }
            if isTLS {
                return self.fail(
                    OutboundHTTPError(
                        .tlsFailed, peer: self.peer,
                        "TLS with \(self.peer.displayName) failed while \(self.phase): \(reason)"))
            }
            return self.fail(OutboundHTTPError(.unreachable, peer: self.peer, "\(self.phase) failed: \(reason)"))
        }
    }

    /// The deadline passed: the request's timeout while one is in flight, the idle timeout
    /// while `ready`.
    package mutating func timedOut(after timeout: Duration) -> Action {
        switch self.state {
        case .idle, .closed:
            return .none
        case .ready:
            self.state = .closed
            return .close
        case .resolving, .connecting, .sending, .receiving:
            return self.fail(
                OutboundHTTPError(.timedOut, peer: self.peer, "no answer within \(timeout) (while \(self.phase))"))
        }
    }

    /// The owner closes the connection (shutdown): the request in flight, if any, fails.
    package mutating func shutdown() -> Action {
        switch self.state {
        case .idle, .closed:
            self.state = .closed
            return .none
        case .ready:
            self.state = .closed
            return .close
        case .resolving, .connecting, .sending, .receiving:
            return self.fail(OutboundHTTPError(.unreachable, peer: self.peer, "the gateway is shutting down"))
        }
    }

    private mutating func resend() -> Action {
        self.wasResent = true
        self.isReused = false
        self.reader = OutboundResponseReader(peer: self.reader.peer, maximumBodyBytes: self.reader.maximumBodyBytes)
        self.reader.expectResponse(toMethod: self.method)
        self.state = .resolving
        return .reconnect
    }

    private mutating func fail(_ error: OutboundHTTPError) -> Action {
        self.state = .closed
        self.request = []
        return .complete(.failure(error), keepConnection: false)
    }

    private static func phase(of state: State) -> String {
        switch state {
        case .idle, .ready, .closed: "idle"
        case .resolving: "resolving the host"
        case .connecting: "connecting"
        case .sending: "sending the request (TLS handshake included)"
        case .receiving: "waiting for the answer"
        }
    }
}
