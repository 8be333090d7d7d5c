import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO

/// TLSTransport server and client over a non-blocking socket pair, pumped by hand.
@Suite struct TLSTransportTests {
    let pki = TLSTestPKI.shared

    func serverContext(_ configure: (inout TLSServerSettings) -> Void = { _ in }) throws -> TLSServerContext {
        var settings = TLSServerSettings(certificate: self.pki.ecdsa)
        configure(&settings)
        return try TLSServerContext(settings: settings)
    }

    func clientContext(certificate: TLSCertificateFiles? = nil) throws -> TLSClientContext {
        try TLSClientContext(
            settings: TLSClientSettings(caFilePath: self.pki.caCertificate, clientCertificate: certificate))
    }

    @Test func handshakeDataBothWaysAndCloseNotify() throws {
        let (client, server) = try TLSPump.pair(server: self.serverContext(), client: self.clientContext())
        #expect(client.transport.isHandshaking)
        #expect(server.transport.isHandshaking)
        // 200 KB each way: many records, partial writes, several reads per edge.
        let request = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let response = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        client.outbox = request
        server.outbox = response
        let done = TLSPump.run(client, server) {
            server.inbox.count == request.count && client.inbox.count == response.count
        }
        #expect(done, "client error: \(String(describing: client.error)), server: \(String(describing: server.error))")
        #expect(server.inbox == request)
        #expect(client.inbox == response)
        #expect(!client.transport.isHandshaking && !server.transport.isHandshaking)
        #expect(server.transport.negotiatedProtocol == "TLSv1.3")
        #expect(client.transport.negotiatedProtocol == "TLSv1.3")
        #expect(server.transport.negotiatedCipher == "TLS_AES_128_GCM_SHA256")
        #expect(server.transport.negotiatedALPN == "http/1.1")
        #expect(client.transport.negotiatedALPN == "http/1.1")
        #expect(!server.transport.isResumed)
        #expect(server.transport.serverName == "localhost")
        #expect(server.transport.verifiedPeerSubject == nil)

        client.transport.shutdownOutput()
        TLSPump.run(client, server) { server.sawEndOfFile }
        #expect(server.sawEndOfFile && server.error == nil)
        server.transport.shutdownOutput()
        TLSPump.run(client, server) { client.sawEndOfFile }
        #expect(client.sawEndOfFile && client.error == nil)
        client.transport.close()
        server.transport.close()
        server.transport.close()  // idempotent
    }

    /// `clear` skips `ERR_clear_error` when the queue is already empty (the common case, before
    /// every read and write); it must still empty a queue that holds an entry.
    @Test func clearEmptiesAQueueWithAStaleEntryAndKeepsAnEmptyOneEmpty() throws {
        TLSErrorQueue.clear()
        #expect(TLSErrorQueue.isEmpty)
        TLSErrorQueue.clear()
        #expect(TLSErrorQueue.isEmpty)
        TLSErrorQueue.leaveStaleEntryForTesting()
        #expect(!TLSErrorQueue.isEmpty)
        TLSErrorQueue.clear()
        #expect(TLSErrorQueue.isEmpty)
        #expect(TLSErrorQueue.drain() == "")
    }

    /// A listener's connections keep their record buffers between records; the loop's sweep
    /// frees them when nothing waits in them, and never when unread bytes do.
    @Test func idleBuffersAreFreedOnlyWithNothingPendingAndComeBackForTheNextRecord() throws {
        let (client, server) = try TLSPump.exchange(server: self.serverContext(), client: self.clientContext())
        #expect(server.transport.releaseIdleBuffers())
        #expect(server.transport.releaseIdleBuffers(), "nothing held: still true")

        // Two records in one read(2): the second waits in OpenSSL's read buffer.
        for record in ["first", "second"] {
            try Array(record.utf8).withUnsafeBytes { raw in
                _ = try client.transport.write(raw.baseAddress!, count: raw.count)
            }
        }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let first = try buffer.withUnsafeMutableBytes {
            try server.transport.read(into: $0.baseAddress!, count: $0.count)
        }
        #expect(first == .processed(5))
        #expect(!server.transport.releaseIdleBuffers(), "the second record is still in the buffer")
        let second = try buffer.withUnsafeMutableBytes {
            try server.transport.read(into: $0.baseAddress!, count: $0.count)
        }
        #expect(second == .processed(6))
        #expect(Array(buffer[0..<6]) == Array("second".utf8))
        #expect(server.transport.releaseIdleBuffers())

        // Both directions still work after a release.
        client.outbox = Array("again".utf8)
        server.inbox = []
        server.outbox = Array(repeating: UInt8(ascii: "x"), count: 50_000)
        client.inbox = []
        let done = TLSPump.run(client, server) { server.inbox.count == 5 && client.inbox.count == 50_000 }
        #expect(done)
        #expect(server.inbox == Array("again".utf8))
    }

    @Test func theSweepFreesATransportOnlyAfterATickWithoutUse() throws {
        let (_, server) = try TLSPump.exchange(server: self.serverContext(), client: self.clientContext())
        let sweep = TLSIdleBufferSweep()
        sweep.note(server.transport)
        sweep.note(server.transport)
        #expect(sweep.count == 1, "listed once")
        sweep.sweep()
        #expect(sweep.count == 1, "used since the last tick: kept")
        #expect(server.transport.awaitsBufferSweep && !server.transport.usedSinceSweep)
        sweep.note(server.transport)
        sweep.sweep()
        #expect(sweep.count == 1, "used again: kept")
        sweep.sweep()
        #expect(sweep.count == 0, "a tick without use: freed and dropped")
        #expect(!server.transport.awaitsBufferSweep)
        sweep.note(server.transport)
        server.transport.close()
        sweep.sweep()
        #expect(sweep.count == 0, "a closed transport is dropped at once")
    }

    /// `drained` lets the owner skip the read that would find the socket empty: it must say
    /// so only when neither the socket nor OpenSSL's read-ahead buffer holds a byte, or a
    /// request would wait for an edge that never comes.
    @Test func drainedOnlyWhenNeitherTheSocketNorOpenSSLHoldsAByte() throws {
        let (client, server) = try TLSPump.exchange(server: self.serverContext(), client: self.clientContext())
        var buffer = [UInt8](repeating: 0, count: 16_384)
        func readOnce() throws -> (bytes: [UInt8], drained: Bool)? {
            try buffer.withUnsafeMutableBytes { raw in
                guard case .processed(let n) = try server.transport.read(into: raw.baseAddress!, count: raw.count)
                else { return nil }
                return (Array(raw[0..<n]), server.transport.drained(afterReading: n, of: raw.count))
            }
        }
        func send(_ bytes: [UInt8]) throws {
            var offset = 0
            while offset < bytes.count {
                let result = try bytes[offset...].withUnsafeBytes {
                    try client.transport.write($0.baseAddress!, count: $0.count)
                }
                guard case .processed(let n) = result else { throw TestFailure("client write blocked") }
                offset += n
            }
        }

        // One record: read whole, nothing left anywhere.
        try send(Array("one".utf8))
        let one = try readOnce()
        #expect(one?.bytes == Array("one".utf8))
        #expect(one?.drained == true)

        // Three records: one read(2) takes all three; two still wait in OpenSSL's buffer.
        for record in ["a", "b", "c"] { try send(Array(record.utf8)) }
        #expect(try readOnce().map { [$0.bytes == Array("a".utf8), $0.drained] } == [true, false])
        #expect(try readOnce().map { [$0.bytes == Array("b".utf8), $0.drained] } == [true, false])
        #expect(try readOnce().map { [$0.bytes == Array("c".utf8), $0.drained] } == [true, true])

        // More than OpenSSL's read buffer holds: a read that fills it proves nothing.
        let large = (0..<60_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try send(large)
        var received: [UInt8] = []
        var reads = 0
        while let (bytes, drained) = try readOnce() {
            received += bytes
            reads += 1
            if drained { break }
            #expect(reads < 100)
        }
        #expect(received == large)
        #expect(reads >= 4, "60,000 bytes come in records of at most 16 KiB")
        // Drained was true: the read it saves would have found nothing.
        #expect(try readOnce() == nil)
    }

    @Test func truncatedStreamAfterHandshakeIsEndOfFile() throws {
        let (client, server) = try TLSPump.exchange(server: self.serverContext(), client: self.clientContext())
        #expect(server.inbox.count == 4)
        // TCP FIN without close_notify: end of stream for HTTP framing, not an error.
        shutdown(client.transport.fd, Int32(SHUT_WR))
        TLSPump.run(client, server) { server.sawEndOfFile }
        #expect(server.sawEndOfFile)
        #expect(server.error == nil)
    }

    @Test func resumesWithTicketsAndReportsIt() throws {
        let server = try self.serverContext()
        let client = try self.clientContext()
        let first = try TLSPump.exchange(server: server, client: client)
        #expect(!first.client.transport.isResumed)
        #expect(client.cachedSessionCount == 1)
        first.client.transport.close()
        first.server.transport.close()

        let second = try TLSPump.exchange(server: server, client: client)
        #expect(second.client.inbox == Array("pong".utf8))
        #expect(second.client.transport.isResumed)
        #expect(second.server.transport.isResumed)

        // Another port is another cache entry: no resumption offered.
        let other = try TLSPump.exchange(server: server, client: client, port: 8443)
        #expect(!other.server.transport.isResumed)
    }

    @Test func resumesAcrossContextsSharingATicketKeyFile() throws {
        let keyFile = self.pki.path("ticket-keys-\(UUID().uuidString)")
        let keys = (0..<160).map { _ in UInt8.random(in: 0...255) }
        try Data(keys).write(to: URL(fileURLWithPath: keyFile))
        let serverA = try self.serverContext { $0.ticketKeyFilePath = keyFile }
        let serverB = try self.serverContext { $0.ticketKeyFilePath = keyFile }
        let client = try self.clientContext()

        _ = try TLSPump.exchange(server: serverA, client: client)
        let second = try TLSPump.exchange(server: serverB, client: client)
        #expect(second.server.transport.isResumed, "instance B resumes instance A's ticket")

        // An instance with its own (random) keys cannot: a full handshake, still successful.
        let serverC = try self.serverContext()
        let third = try TLSPump.exchange(server: serverC, client: client)
        #expect(third.client.inbox == Array("pong".utf8))
        #expect(!third.server.transport.isResumed)
    }

    @Test func rotatedKeysStillResumeOnceThenNot() throws {
        let server = try self.serverContext()
        let client = try self.clientContext()
        _ = try TLSPump.exchange(server: server, client: client)
        let namesBefore = server.ticketKeys.keyNames
        server.ticketKeys.rotate()
        #expect(server.ticketKeys.keyNames.count == 2)
        #expect(server.ticketKeys.keyNames[1] == namesBefore[0])
        let afterOne = try TLSPump.exchange(server: server, client: client)
        #expect(afterOne.server.transport.isResumed, "the previous key still decrypts")

        // The resumed connection got a new ticket under the current key; two rotations later
        // no key that made it is left.
        server.ticketKeys.rotate()
        server.ticketKeys.rotate()
        let afterThree = try TLSPump.exchange(server: server, client: client)
        #expect(afterThree.client.inbox == Array("pong".utf8))
        #expect(!afterThree.server.transport.isResumed)
    }

    @Test func reloadKeepsInMemoryTicketKeys() throws {
        let old = try self.serverContext()
        let client = try self.clientContext()
        _ = try TLSPump.exchange(server: old, client: client)
        let reloaded = try TLSServerContext(settings: old.settings, previous: old)
        #expect(reloaded.ticketKeys === old.ticketKeys)
        let after = try TLSPump.exchange(server: reloaded, client: client)
        #expect(after.server.transport.isResumed)
    }

    @Test(arguments: [
        ("rsa.test", "CN=rsa.test"), ("RSA.Test", "CN=rsa.test"), ("a.wild.test", "CN=*.wild.test"),
        ("a.b.wild.test", "CN=default.test"), ("default.test", "CN=default.test"), ("unknown.test", "CN=default.test"),
    ])
    func serverNamePicksTheCertificate(serverName: String, subject: String) throws {
        let server = try self.serverContext {
            $0.serverNameCertificates = [
                TLSServerNameCertificate(serverNames: ["rsa.test"], files: self.pki.rsa),
                TLSServerNameCertificate(serverNames: ["*.wild.test"], files: self.pki.wildcard),
            ]
        }
        // The client checks the name, so a certificate for another name fails verification:
        // what the client saw is read from the server's choice of certificate instead.
        let (client, peer) = try TLSPump.pair(server: server, client: self.clientContext(), serverName: serverName)
        client.outbox = Array("x".utf8)
        TLSPump.run(client, peer) { peer.inbox.count == 1 || client.error != nil }
        #expect(peer.transport.serverName == serverName)
        if subject == "CN=default.test" && serverName != "default.test" {
            #expect(client.transport.verificationFailure == .hostnameMismatch)
        } else {
            #expect(client.error == nil)
            #expect(client.transport.verifiedPeerSubject == subject)
        }
    }

    @Test func serverNamesDefaultToTheCertificatesSubjectAltNames() throws {
        let server = try self.serverContext {
            $0.serverNameCertificates = [
                TLSServerNameCertificate(serverNames: [], files: self.pki.rsa),
                TLSServerNameCertificate(serverNames: [], files: self.pki.wildcard),
            ]
        }
        for (name, subject) in [("rsa.test", "CN=rsa.test"), ("x.wild.test", "CN=*.wild.test")] {
            let (client, peer) = try TLSPump.exchange(server: server, client: self.clientContext(), serverName: name)
            #expect(peer.inbox == Array("ping".utf8))
            #expect(client.transport.verifiedPeerSubject == subject)
        }
    }

    @Test func rsaCertificateNegotiatesOverTLS13() throws {
        let server = try TLSServerContext(settings: TLSServerSettings(certificate: self.pki.rsa))
        let (client, peer) = try TLSPump.exchange(server: server, client: self.clientContext(), serverName: "rsa.test")
        #expect(client.inbox == Array("pong".utf8))
        #expect(peer.transport.negotiatedProtocol == "TLSv1.3")
        #expect(client.transport.verifiedPeerSubject == "CN=rsa.test")
    }

    @Test func mutualTLSRequiredExposesTheSubject() throws {
        let server = try self.serverContext {
            $0.clientAuthentication = TLSClientAuthentication(caFilePath: self.pki.caCertificate, mode: .required)
        }
        let with = try TLSPump.exchange(server: server, client: self.clientContext(certificate: self.pki.client))
        #expect(with.server.inbox == Array("ping".utf8))
        #expect(with.server.transport.verifiedPeerSubject == "CN=app-client,O=Attest Test")

        let (client, peer) = try TLSPump.pair(server: server, client: self.clientContext())
        client.outbox = Array("ping".utf8)
        TLSPump.run(client, peer) { peer.error != nil }
        guard case .tls(let reason) = peer.error else {
            Issue.record("expected a TLS error, got \(String(describing: peer.error))")
            return
        }
        #expect(reason.contains("peer did not return a certificate"))
        #expect(peer.inbox.isEmpty)
    }

    @Test func mutualTLSOptionalLetsClientsWithoutCertificatesIn() throws {
        let server = try self.serverContext {
            $0.clientAuthentication = TLSClientAuthentication(caFilePath: self.pki.caCertificate, mode: .optional)
        }
        let without = try TLSPump.exchange(server: server, client: self.clientContext())
        #expect(without.server.inbox == Array("ping".utf8))
        #expect(without.server.transport.verifiedPeerSubject == nil)
        let with = try TLSPump.exchange(server: server, client: self.clientContext(certificate: self.pki.client))
        #expect(with.server.transport.verifiedPeerSubject == "CN=app-client,O=Attest Test")

        // A certificate from a CA the listener does not trust is refused, even when optional.
        let strangerFiles = self.pki.unknownCA
        let (client, peer) = try TLSPump.pair(server: server, client: self.clientContext(certificate: strangerFiles))
        client.outbox = Array("ping".utf8)
        TLSPump.run(client, peer) { peer.error != nil }
        #expect(peer.transport.verificationFailure == .unknownCertificateAuthority)
    }

    @Test(arguments: [
        ("expired", TLSVerificationFailure.expiredCertificate),
        ("wrong-host", TLSVerificationFailure.hostnameMismatch),
        ("unknown-ca", TLSVerificationFailure.unknownCertificateAuthority),
    ])
    func upstreamVerificationFailuresHaveTheirOwnReason(certificate: String, expected: TLSVerificationFailure) throws {
        let files =
            switch certificate {
            case "expired": self.pki.expired
            case "wrong-host": self.pki.wrongHost
            default: self.pki.unknownCA
            }
        let server = try TLSServerContext(settings: TLSServerSettings(certificate: files))
        if certificate == "expired" {
            #expect(server.warnings.count == 1)
            #expect(server.warnings.first?.message.contains("expired") == true)
        }
        let (client, peer) = try TLSPump.pair(server: server, client: self.clientContext())
        client.outbox = Array("GET / HTTP/1.1\r\n\r\n".utf8)
        TLSPump.run(client, peer) { client.error != nil }
        #expect(client.transport.verificationFailure == expected)
        guard case .tls(let reason) = client.error else {
            Issue.record("expected .tls, got \(String(describing: client.error))")
            return
        }
        #expect(reason.contains(expected.code))
        #expect(peer.inbox.isEmpty, "no application byte reaches an unverified server")
    }

    @Test func ipAddressUpstreamIsCheckedAgainstIPSubjectAltName() throws {
        let server = try self.serverContext()
        let good = try TLSPump.exchange(server: server, client: self.clientContext(), serverName: "127.0.0.1")
        #expect(good.client.inbox == Array("pong".utf8))
        #expect(good.server.transport.serverName == nil, "no SNI for an address")
        let (client, peer) = try TLSPump.pair(server: server, client: self.clientContext(), serverName: "127.0.0.2")
        TLSPump.run(client, peer) { client.error != nil }
        #expect(client.transport.verificationFailure == .hostnameMismatch)
    }

    @Test func garbageInsteadOfClientHelloIsATLSError() throws {
        let (raw, serverFD) = try TLSPump.socketPair()
        defer { close(raw) }
        let server = TLSPeer(try TLSTransport(fd: serverFD, server: self.serverContext()))
        let garbage = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8) + (0..<512).map { _ in UInt8.random(in: 0...255) }
        _ = garbage.withUnsafeBytes { write(raw, $0.baseAddress, $0.count) }
        server.step()
        guard case .tls(let reason) = server.error else {
            Issue.record("expected .tls, got \(String(describing: server.error))")
            return
        }
        #expect(!reason.isEmpty)
        server.transport.close()
    }

    @Test func truncatedClientHelloIsATLSError() throws {
        // A real ClientHello, captured from a client transport.
        let (clientFD, capture) = try TLSPump.socketPair()
        let client = TLSPeer(
            try TLSTransport(fd: clientFD, client: self.clientContext(), serverName: "localhost", port: 443))
        client.step()
        var hello = [UInt8](repeating: 0, count: 4096)
        let n = hello.withUnsafeMutableBytes { read(capture, $0.baseAddress, $0.count) }
        close(capture)
        client.transport.close()
        #expect(n > 100)

        let (raw, serverFD) = try TLSPump.socketPair()
        let server = TLSPeer(try TLSTransport(fd: serverFD, server: self.serverContext()))
        _ = hello.withUnsafeBytes { write(raw, $0.baseAddress, n / 2) }
        server.step()
        #expect(server.error == nil && !server.sawEndOfFile, "half a record: wait for more")
        #expect(server.transport.isHandshaking)
        close(raw)
        server.step()
        guard case .tls(let reason) = server.error else {
            Issue.record("expected .tls, got \(String(describing: server.error))")
            return
        }
        #expect(reason.contains("unexpected eof"))
        server.transport.close()
    }

    @Test func tlsErrorLeavesNoStaleEntryInTheErrorQueue() throws {
        let (raw, serverFD) = try TLSPump.socketPair()
        defer { close(raw) }
        let server = TLSPeer(try TLSTransport(fd: serverFD, server: self.serverContext()))
        _ = [UInt8](repeating: 0x16, count: 64).withUnsafeBytes { write(raw, $0.baseAddress, $0.count) }
        server.step()
        #expect(server.error != nil)
        // The next, healthy connection on this thread reports no error from the last one.
        let good = try TLSPump.exchange(server: self.serverContext(), client: self.clientContext())
        #expect(good.client.error == nil && good.server.error == nil)
        #expect(good.client.inbox == Array("pong".utf8))
    }
}
