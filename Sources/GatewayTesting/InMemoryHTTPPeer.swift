package import GatewayIO

/// The test's side of one in-memory stream: the client of a proxied connection, or the upstream
/// a pool connected to. Sends bytes, reads whole HTTP messages, sees the end of the stream.
/// `transport` is the plain `InMemoryStreamEnd` or a `TLSTransport` over it.
///
/// No event loop: every call pumps (pending output, then reads until nothing comes), and the
/// waiting calls poll with `eventually` while the gateway's loop works on the other end. They
/// are async and sleep the task, not the thread: the unit tests run in parallel on a pool as
/// wide as the machine, and a test that blocked a thread could starve the shutdown of another.
/// Confined to the test that made it.
package final class InMemoryHTTPPeer {
    /// How long the waits wait. A bound for a broken test, not a latency: in the parallel unit
    /// run a waiting task may not get a thread back for seconds, and a handshake or a large body
    /// needs the test to pump many times.
    package static let patience: Duration = .seconds(30)

    private let transport: any ByteTransport
    private var outbox: [UInt8] = []
    /// Received and not yet taken by `readMessage`.
    package private(set) var received: [UInt8] = []
    package private(set) var sawEndOfStream = false
    package private(set) var failure: TransportError?
    private var isClosed = false

    package init(_ transport: any ByteTransport) {
        self.transport = transport
    }

    deinit {
        self.close()
    }

    /// The TLS session, when this peer speaks TLS.
    package var tls: TLSTransport? { self.transport as? TLSTransport }

    package func send(_ text: String) {
        self.send(Array(text.utf8))
    }

    package func send(_ bytes: [UInt8]) {
        self.outbox += bytes
        self.pump()
    }

    /// Everything queued by `send` has been written into the stream.
    package var hasSentEverything: Bool { self.outbox.isEmpty }

    /// Writes what is pending (the same bytes again after `.wouldBlock`, as TLS requires), then
    /// reads until nothing more is there now.
    package func pump() {
        guard !self.isClosed, self.failure == nil else { return }
        do throws(TransportError) {
            while !self.outbox.isEmpty {
                let result = self.outbox.withUnsafeBytes { bytes in
                    Result { () throws(TransportError) in
                        try self.transport.write(bytes.baseAddress!, count: bytes.count)
                    }
                }
                guard case .processed(let n) = try result.get(), n > 0 else { break }
                self.outbox.removeFirst(n)
            }
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while !self.sawEndOfStream {
                let result = chunk.withUnsafeMutableBytes { bytes in
                    Result { () throws(TransportError) in
                        try self.transport.read(into: bytes.baseAddress!, count: bytes.count)
                    }
                }
                switch try result.get() {
                case .processed(let n): self.received += chunk[0..<n]
                case .wouldBlock: return
                case .endOfFile: self.sawEndOfStream = true
                }
            }
        } catch {
            self.failure = error
        }
    }

    /// Waits for one whole message and takes its bytes. Throws when none came in time.
    package func readMessage(isResponse: Bool, requestMethod: String = "GET") async throws -> HTTPTestMessage {
        var parsed: (message: HTTPTestMessage, consumed: Int)?
        var parseError: HTTPTestMessage.Malformed?
        await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(1)) { () async -> Bool in
            self.pump()
            do throws(HTTPTestMessage.Malformed) {
                parsed = try HTTPTestMessage.parse(
                    self.received, isResponse: isResponse, requestMethod: requestMethod,
                    atEndOfStream: self.sawEndOfStream)
            } catch {
                parseError = error
                return true
            }
            return parsed != nil || self.sawEndOfStream || self.failure != nil
        }
        if let parseError { throw parseError }
        guard let parsed else {
            throw HTTPTestMessage.Malformed(
                description: "no whole message; received \(self.received.count) bytes "
                    + "(end of stream: \(self.sawEndOfStream), failure: \(String(describing: self.failure)))")
        }
        self.received.removeFirst(parsed.consumed)
        return parsed.message
    }

    package func readResponse(to method: String = "GET") async throws -> HTTPTestMessage {
        try await self.readMessage(isResponse: true, requestMethod: method)
    }

    package func readRequest() async throws -> HTTPTestMessage {
        try await self.readMessage(isResponse: false)
    }

    /// Waits until everything `send` queued is written (with TLS, the handshake is done first).
    /// False if it was not.
    package func waitUntilSent() async -> Bool {
        await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(1)) { () async -> Bool in
            self.pump()
            return self.outbox.isEmpty || self.failure != nil
        } && self.outbox.isEmpty
    }

    /// Waits until at least `count` bytes are in `received`. False if they did not come.
    package func waitForReceived(atLeast count: Int) async -> Bool {
        await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(1)) { () async -> Bool in
            self.pump()
            return self.received.count >= count || self.sawEndOfStream || self.failure != nil
        } && self.received.count >= count
    }

    /// Waits until the other side ended the stream (after whatever it sent). False if it did not.
    package func waitForEndOfStream() async -> Bool {
        await eventually(timeout: InMemoryHTTPPeer.patience, interval: .milliseconds(1)) { () async -> Bool in
            self.pump()
            return self.sawEndOfStream || self.failure != nil
        }
    }

    /// Stops sending (a half-close); reading goes on.
    package func shutdownOutput() {
        self.transport.shutdownOutput()
    }

    package func close() {
        guard !self.isClosed else { return }
        self.isClosed = true
        self.transport.close()
    }
}

@available(*, unavailable)
extension InMemoryHTTPPeer: Sendable {}
