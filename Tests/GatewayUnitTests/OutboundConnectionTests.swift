import Glibc
import Testing

@testable import GatewayIO

/// The steps `OutboundConnection` and the Redis driver share, over a connected socket pair:
/// no loop, no server.
@Suite struct OutboundConnectionTests {
    /// Two connected, non-blocking Unix stream sockets.
    func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else { throw IOError("socketpair", errno: errno) }
        return (fds[0], fds[1])
    }

    @Test func aPlainConnectOpensOnceAnEventProvesIt() throws {
        let (near, far) = try self.socketPair()
        defer { SystemCalls.close(far) }
        let transport = PlainTransport(fd: near)
        defer { transport.close() }
        var handshake = OutboundHandshake(tls: nil)
        guard case .wait(writable: true) = handshake.advance(transport, connectFinished: false) else {
            Issue.record("an event that proves nothing waits for writability")
            return
        }
        #expect(handshake.phase == .connecting)
        guard case .open = handshake.advance(transport, connectFinished: true) else {
            Issue.record("a finished plain connect opens")
            return
        }
        #expect(handshake.phase == .open)
    }

    @Test func aPlainConnectThatFinishedAtOnceOpensWithoutAnEvent() {
        var plain = OutboundHandshake(tls: nil)
        let first = plain.connectedAtOnce()
        let second = plain.connectedAtOnce()
        #expect(first)
        #expect(plain.phase == .open)
        #expect(!second, "once only")
    }

    @Test func tlsUpgradesTheSocketAndWaitsForTheServersAnswer() throws {
        let (near, far) = try self.socketPair()
        defer { SystemCalls.close(far) }
        let context = try TLSClientContext(settings: TLSClientSettings(caFilePath: nil))
        var handshake = OutboundHandshake(tls: OutboundTLS(context: context, serverName: "localhost", port: 443))
        let openedAtOnce = handshake.connectedAtOnce()
        #expect(!openedAtOnce, "a TLS connection opens after its handshake")
        let plain = PlainTransport(fd: near)
        guard case .upgrade(let session) = handshake.advance(plain, connectFinished: true) else {
            Issue.record("a finished connect with TLS upgrades the socket")
            plain.close()
            return
        }
        defer { session.close() }
        #expect(session.fd == near)
        #expect(handshake.phase == .handshaking)
        // The ClientHello goes out; the answer is a read away.
        guard case .wait(writable: false) = handshake.advance(session, connectFinished: true) else {
            Issue.record("the handshake waits for the server")
            return
        }
        var hello = [UInt8](repeating: 0, count: 4096)
        let sent = hello.withUnsafeMutableBytes { Glibc.read(far, $0.baseAddress, $0.count) }
        #expect(sent > 5 && hello[0] == 0x16, "a TLS handshake record reached the server")
    }

    @Test func aPeerThatHangsUpFailsTheHandshake() throws {
        let (near, far) = try self.socketPair()
        let context = try TLSClientContext(settings: TLSClientSettings(caFilePath: nil))
        var handshake = OutboundHandshake(tls: OutboundTLS(context: context, serverName: "localhost", port: 443))
        guard case .upgrade(let session) = handshake.advance(PlainTransport(fd: near), connectFinished: true) else {
            Issue.record("a finished connect with TLS upgrades the socket")
            return
        }
        defer { session.close() }
        _ = handshake.advance(session, connectFinished: true)
        SystemCalls.close(far)
        guard case .failed(.tlsFailed(_, verification: nil)) = handshake.advance(session, connectFinished: true) else {
            Issue.record("a closed peer fails the handshake")
            return
        }
        #expect(handshake.phase == .failed)
    }

    @Test func aUnixPathTooLongForTheAddressIsRefusedBeforeAnyConnect() {
        let endpoint = OutboundEndpoint.unix(path: "/tmp/" + String(repeating: "x", count: 200))
        #expect(throws: IOError.self) { try endpoint.openSocket() }
        do {
            _ = try endpoint.openSocket()
        } catch {
            #expect(error.errno == ENAMETOOLONG)
        }
    }

    @Test func closeReasonsReadAsTheLogsWant() throws {
        #expect(
            OutboundCloseReason.timedOut(duringHandshake: true).description
                == "the TLS handshake did not finish in time")
        #expect(
            OutboundCloseReason.timedOut(duringHandshake: false).description == "the connect did not finish in time")
        #expect(
            OutboundCloseReason.connectFailed(IOError("connect", errno: ECONNREFUSED)).description
                == IOError("connect", errno: ECONNREFUSED).description)
        #expect(OutboundCloseReason.closedByOwner.description == "closed")
        let address = try #require(SocketAddress(ipLiteral: "::1", port: 6379))
        #expect(OutboundEndpoint.tcp(address).description == "[::1]:6379")
        #expect(OutboundEndpoint.unix(path: "/run/redis.sock").description == "/run/redis.sock")
    }
}
