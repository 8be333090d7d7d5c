import Foundation
import GatewayTesting
import Glibc
import Synchronization
import Testing

@testable import GatewayIO

/// `OutboundConnection` on a real loop over loopback: plain and TLS connects, the handshake's
/// verdicts, the connect deadline, a Unix socket, and the idempotent close.
@Suite(.serialized, .timeLimit(.minutes(1))) struct OutboundConnectionLoopTests {
    let pki = TLSTestPKI.shared

    func serverContext() throws -> TLSServerContext {
        try TLSServerContext(settings: TLSServerSettings(certificate: self.pki.ecdsa))
    }

    func clientContext(trusted: Bool = true) throws -> TLSClientContext {
        try TLSClientContext(settings: TLSClientSettings(caFilePath: trusted ? self.pki.caCertificate : nil))
    }

    @Test func tlsRequestAndAnswerOverTheChannel() throws {
        let server = try TLSOneShotServer(serve: TLSInteropTests.serveOneRequest(try self.serverContext()))
        let address = try #require(SocketAddress(ipLiteral: "127.0.0.1", port: server.port))
        let tls = OutboundTLS(context: try self.clientContext(), serverName: "localhost", port: Int(server.port))
        let owner = try OutboundOwner.run(
            to: .tcp(address), tls: tls, request: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        #expect(server.wait() == "ok TLSv1.3 http/1.1")
        let outcome = owner.outcome()
        #expect(outcome.connected && outcome.opened)
        #expect(outcome.failure == nil)
        #expect(outcome.answer.hasSuffix("\r\n\r\nhello"), "\(outcome.answer)")
        #expect(outcome.sawEndOfFile)
        #expect(outcome.negotiatedProtocol == "TLSv1.3")
    }

    @Test func anUntrustedCertificateFailsTheHandshakeWithItsVerdict() throws {
        let server = try TLSOneShotServer(serve: TLSInteropTests.serveOneRequest(try self.serverContext()))
        let address = try #require(SocketAddress(ipLiteral: "127.0.0.1", port: server.port))
        let tls = OutboundTLS(
            context: try self.clientContext(trusted: false), serverName: "localhost", port: Int(server.port))
        let owner = try OutboundOwner.run(to: .tcp(address), tls: tls, request: "GET / HTTP/1.1\r\n\r\n")
        _ = server.wait()
        let outcome = owner.outcome()
        #expect(outcome.connected && !outcome.opened)
        guard case .tlsFailed(_, let verification) = outcome.failure else {
            Issue.record("expected a TLS failure, got \(String(describing: outcome.failure))")
            return
        }
        #expect(verification == .unknownCertificateAuthority)
    }

    @Test func aHandshakeNobodyAnswersEndsAtTheConnectDeadline() throws {
        // A listener that never accepts: the kernel completes the connect, nobody speaks TLS.
        let listener = try SystemCalls.listen(on: try #require(SocketAddress(ipLiteral: "127.0.0.1", port: 0)))
        defer { SystemCalls.close(listener) }
        let address = try #require(SystemCalls.localAddress(listener))
        let tls = OutboundTLS(context: try self.clientContext(), serverName: "localhost", port: Int(address.port))
        let owner = try OutboundOwner.run(to: .tcp(address), tls: tls, request: "", connectTimeout: 200_000_000)
        let outcome = owner.outcome()
        guard case .timedOut(let duringHandshake) = outcome.failure else {
            Issue.record("expected a timeout, got \(String(describing: outcome.failure))")
            return
        }
        #expect(duringHandshake)
        #expect(outcome.failure?.description == "the TLS handshake did not finish in time")
    }

    @Test func aRefusedConnectIsReportedOrThrown() throws {
        let listener = try SystemCalls.listen(on: try #require(SocketAddress(ipLiteral: "127.0.0.1", port: 0)))
        let address = try #require(SystemCalls.localAddress(listener))
        SystemCalls.close(listener)
        do {
            let owner = try OutboundOwner.run(to: .tcp(address), tls: nil, request: "")
            guard case .connectFailed(let error) = owner.outcome().failure else {
                Issue.record("expected a connect failure, got \(String(describing: owner.outcome().failure))")
                return
            }
            #expect(error.errno == ECONNREFUSED)
        } catch let error as IOError {
            #expect(error.errno == ECONNREFUSED)
        }
    }

    @Test func aUnixSocketCarriesPlainBytesAndCloseKeepsTheFirstReason() throws {
        let path = self.pki.path("outbound-\(UUID().uuidString.prefix(8)).sock")
        let listener = try UnixListener(path: path)
        defer { listener.stop() }
        let owner = try OutboundOwner.run(to: .unix(path: path), tls: nil, request: "PING\r\n", closeAfterSending: true)
        #expect(listener.receive(count: 6) == "PING\r\n")
        let outcome = owner.outcome()
        #expect(outcome.failure == nil)
        #expect(outcome.closeReasonAfterTwoCloses == "closed")
    }

    @Test func outputBeyondTheHighWaterMarkIsBackPressureUntilFlushed() throws {
        let path = self.pki.path("outbound-\(UUID().uuidString.prefix(8)).sock")
        let listener = try UnixListener(path: path)
        defer { listener.stop() }
        let size = 4 * OutboundConnection.highWaterMark
        let received = Mutex(0)
        let flushed = DispatchSemaphore(value: 0)
        // The reader starts after the first flush, so that flush finds the socket full.
        let reader = Thread {
            flushed.wait()
            received.withLock { $0 = listener.receive(count: size).utf8.count }
        }
        reader.start()
        let owner = try OutboundOwner.run(
            to: .unix(path: path), tls: nil, request: String(repeating: "x", count: size),
            afterFirstFlush: { flushed.signal() })
        let outcome = owner.outcome()
        #expect(outcome.failure == nil)
        #expect(outcome.backedUpAfterFirstFlush, "nobody read yet: more than the mark stayed queued")
        #expect(outcome.unsentAtEnd == 0)
        #expect(outcome.sawEndOfFile)
        #expect(received.withLock { $0 } == size)
    }
}

/// Drives one `OutboundConnection` on its own loop: sends `request` once open, reads to end of
/// file (or closes at once), and records what it heard.
private final class OutboundOwner: OutboundConnectionDelegate, @unchecked Sendable {
    struct Outcome {
        var connected = false
        var opened = false
        var failure: OutboundCloseReason?
        var answer = ""
        var sawEndOfFile = false
        var negotiatedProtocol: String?
        var closeReasonAfterTwoCloses: String?
        var backedUpAfterFirstFlush = false
        var unsentAtEnd = -1
    }

    let loop: EventLoop
    let request: [UInt8]
    let closeAfterSending: Bool
    let afterFirstFlush: @Sendable () -> Void
    private let done = DispatchSemaphore(value: 0)
    private let state = Mutex(Outcome())
    private var connection: OutboundConnection?
    private var answer: [UInt8] = []

    private init(
        loop: EventLoop, request: String, closeAfterSending: Bool, afterFirstFlush: @escaping @Sendable () -> Void
    ) {
        self.afterFirstFlush = afterFirstFlush
        self.loop = loop
        self.request = Array(request.utf8)
        self.closeAfterSending = closeAfterSending
    }

    static func run(
        to endpoint: OutboundEndpoint, tls: OutboundTLS?, request: String, connectTimeout: UInt64 = 5_000_000_000,
        closeAfterSending: Bool = false, afterFirstFlush: @escaping @Sendable () -> Void = {}
    ) throws -> OutboundOwner {
        let loop = try EventLoop(index: 0)
        let owner = OutboundOwner(
            loop: loop, request: request, closeAfterSending: closeAfterSending, afterFirstFlush: afterFirstFlush)
        let thrown = Mutex<IOError?>(nil)
        let started = DispatchSemaphore(value: 0)
        loop.execute {
            do throws(IOError) {
                let connection = try OutboundConnection.open(
                    to: endpoint, tls: tls, loop: loop, connectTimeout: connectTimeout, delegate: owner)
                owner.connection = connection
                if connection.isOpen {
                    owner.state.withLock { $0.connected = true }
                    owner.outboundOpened(connection)
                }
            } catch {
                thrown.withLock { $0 = error }
                owner.done.signal()
            }
            started.signal()
        }
        started.wait()
        let finished = owner.done.wait(timeout: .now() + 20) == .success
        let stopped = DispatchSemaphore(value: 0)
        loop.execute {
            owner.connection?.close()
            loop.close()
            stopped.signal()
        }
        stopped.wait()
        if let error = thrown.withLock({ $0 }) { throw error }
        if !finished { throw TestFailure("the outbound connection never finished") }
        return owner
    }

    func outcome() -> Outcome { self.state.withLock { $0 } }

    func outboundConnected(_ connection: OutboundConnection) {
        self.state.withLock { $0.connected = true }
    }

    func outboundOpened(_ connection: OutboundConnection) {
        self.state.withLock { $0.opened = true }
        connection.send(self.request)
        do {
            try connection.flush()
        } catch {
            self.finish()
            return
        }
        let backedUp = connection.isBackedUp
        self.state.withLock { $0.backedUpAfterFirstFlush = backedUp }
        self.afterFirstFlush()
        if self.closeAfterSending {
            connection.close()
            connection.close(.timedOut(duringHandshake: false))
            self.state.withLock { $0.closeReasonAfterTwoCloses = connection.closeReason?.description }
            self.finish()
            return
        }
        self.read(connection)
    }

    func outboundEvents(_ connection: OutboundConnection, _ events: UInt32) {
        try? connection.flush()
        self.read(connection)
    }

    func outboundFailed(_ connection: OutboundConnection, _ reason: OutboundCloseReason) {
        self.state.withLock { $0.failure = reason }
        self.finish()
    }

    private func read(_ connection: OutboundConnection) {
        while connection.channel.mayRead && !connection.isClosed {
            let outcome: SocketChannel.ReadOutcome
            do {
                outcome = try connection.channel.readOnce()
            } catch {
                self.finish()
                return
            }
            switch outcome {
            case .scratch(let bytes): self.answer.append(contentsOf: bytes)
            case .appended, .wouldBlock: return
            case .endOfFile:
                let answer = String(decoding: self.answer, as: UTF8.self)
                let negotiated = connection.tls?.negotiatedProtocol
                let unsent = connection.unsentCount
                self.state.withLock {
                    $0.unsentAtEnd = unsent
                    $0.answer = answer
                    $0.sawEndOfFile = true
                    $0.negotiatedProtocol = negotiated
                }
                connection.close()
                self.finish()
                return
            }
        }
    }

    private func finish() {
        self.done.signal()
    }
}

/// A Unix socket listener that accepts one connection on a thread and reads from it.
private final class UnixListener: @unchecked Sendable {
    let path: String
    private let fd: Int32

    init(path: String) throws {
        self.path = path
        self.fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(self.fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
        guard bound, listen(self.fd, 4) == 0 else { throw TestFailure("unix listen: errno \(errno)") }
    }

    /// Accepts one connection and reads `count` bytes (or to end of file).
    func receive(count: Int) -> String {
        let client = accept(self.fd, nil, nil)
        guard client >= 0 else { return "accept failed" }
        defer { close(client) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while received.count < count {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(client, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            received.append(contentsOf: buffer[0..<n])
        }
        return String(decoding: received, as: UTF8.self)
    }

    func stop() {
        close(self.fd)
        unlink(self.path)
    }
}
