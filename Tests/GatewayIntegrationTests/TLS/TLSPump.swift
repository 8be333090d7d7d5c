import GatewayTesting
import Glibc

@testable import GatewayIO

/// One end of an in-process TLS exchange: a transport plus the bytes it still has to send
/// and the bytes (and EOF, or error) it received. Driven by `TLSPump`, no event loop: each
/// step tries the pending write, then reads until `.wouldBlock`.
final class TLSPeer {
    let transport: TLSTransport
    var outbox: [UInt8] = []
    var inbox: [UInt8] = []
    var sawEndOfFile = false
    var error: TransportError?

    init(_ transport: TLSTransport) {
        self.transport = transport
    }

    /// The transport no longer closes its socket in deinit: the test peer does.
    deinit {
        self.transport.close()
    }

    var isDone: Bool { self.sawEndOfFile || self.error != nil }

    func step() {
        guard !self.isDone else { return }
        do {
            while !self.outbox.isEmpty {
                let result = try self.outbox.withUnsafeBytes {
                    try self.transport.write($0.baseAddress!, count: $0.count)
                }
                guard case .processed(let n) = result else { break }
                self.outbox.removeFirst(n)
            }
            var buffer = [UInt8](repeating: 0, count: 16_384)
            reading: while true {
                let result = try buffer.withUnsafeMutableBytes {
                    try self.transport.read(into: $0.baseAddress!, count: $0.count)
                }
                switch result {
                case .processed(let n): self.inbox.append(contentsOf: buffer[0..<n])
                case .wouldBlock: break reading
                case .endOfFile:
                    self.sawEndOfFile = true
                    break reading
                }
            }
        } catch {
            self.error = (error as? TransportError) ?? .tls(reason: "unexpected \(error)")
        }
    }
}

enum TLSPump {
    /// A connected pair of non-blocking stream sockets.
    static func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else { throw TestFailure("socketpair: errno \(errno)") }
        return (fds[0], fds[1])
    }

    /// Steps both peers until `done()` or one fails or 5,000 rounds pass. True when `done()`.
    @discardableResult
    static func run(_ a: TLSPeer, _ b: TLSPeer, until done: () -> Bool) -> Bool {
        for _ in 0..<5_000 {
            a.step()
            b.step()
            if done() { return true }
            if a.error != nil || b.error != nil { return done() }
        }
        return done()
    }

    /// A client and a server transport over a socket pair.
    static func pair(
        server: TLSServerContext, client: TLSClientContext, serverName: String = "localhost", port: Int = 443
    ) throws -> (client: TLSPeer, server: TLSPeer) {
        let (clientFD, serverFD) = try self.socketPair()
        let serverTransport = try TLSTransport(fd: serverFD, server: server)
        let clientTransport = try TLSTransport(fd: clientFD, client: client, serverName: serverName, port: port)
        return (TLSPeer(clientTransport), TLSPeer(serverTransport))
    }

    /// Handshake, one request and one response, so that TLS 1.3 tickets reach the client.
    /// Returns the peers (still open).
    static func exchange(
        server: TLSServerContext, client: TLSClientContext, serverName: String = "localhost", port: Int = 443
    ) throws -> (client: TLSPeer, server: TLSPeer) {
        let peers = try self.pair(server: server, client: client, serverName: serverName, port: port)
        peers.client.outbox = Array("ping".utf8)
        self.run(peers.client, peers.server) { peers.server.inbox.count == 4 }
        peers.server.outbox = Array("pong".utf8)
        self.run(peers.client, peers.server) { peers.client.inbox.count == 4 }
        return peers
    }
}
