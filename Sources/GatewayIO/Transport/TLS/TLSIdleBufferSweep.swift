/// Gives idle TLS connections' record buffers back, at the loop's ticks.
///
/// Listener and upstream-pool SSL_CTXs run without `SSL_MODE_RELEASE_BUFFERS`: with it, OpenSSL frees both
/// 16 KiB+ buffers after every record and allocates them again for the next (~1.3k
/// instructions a keep-alive request). Instead each connection notes its transport here when
/// it handles an event, and a tick frees the buffers of every listed transport that was not
/// used since the tick before and holds no pending byte. A busy connection keeps its buffers;
/// an idle one holds none two ticks (≤ 200 ms) after its last event, so the memory of idle
/// connections stays bounded as before (the 10,000-idle-connection bench row).
///
/// Confined to its loop.
package final class TLSIdleBufferSweep {
    private var listed: [TLSTransport] = []

    package init() {}

    /// `transport` handled an event: its buffers stay until a tick finds it unused.
    @inline(__always)
    package func note(_ transport: TLSTransport) {
        transport.usedSinceSweep = true
        guard !transport.awaitsBufferSweep else { return }
        transport.awaitsBufferSweep = true
        self.listed.append(transport)
    }

    package var count: Int { self.listed.count }

    /// Frees the buffers of every listed transport unused since the last sweep (closed ones
    /// freed everything at close) and stops listing it; used ones stay listed for the next.
    /// A transport with pending bytes keeps its buffers: its owner lists it again at its next event.
    package func sweep() {
        guard !self.listed.isEmpty else { return }
        var kept = 0
        for index in self.listed.indices {
            let transport = self.listed[index]
            if transport.usedSinceSweep && !transport.isClosed {
                transport.usedSinceSweep = false
                self.listed[kept] = transport
                kept += 1
            } else {
                transport.awaitsBufferSweep = false
                transport.releaseIdleBuffers()
            }
        }
        self.listed.removeLast(self.listed.count - kept)
    }
}

@available(*, unavailable)
extension TLSIdleBufferSweep: Sendable {}
