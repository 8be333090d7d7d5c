import GateContract
import GatewayIO
import HTTP1
import PolicyModel

/// The response side: nghttp2's data provider takes a stream's queued response bytes within
/// the client's flow-control window, and its trailers at the end.
extension HTTP2ServerConnection {
    func http2ResponseBody(
        _ streamID: Int32, into buffer: UnsafeMutableRawBufferPointer
    ) -> (count: Int, last: Bool, trailers: [(String, String)])? {
        guard let stream = self.stream(streamID) else { return (0, true, []) }
        let count = min(buffer.count, stream.pendingResponseBytes)
        if count == 0 && !stream.responseComplete { return nil }
        if count > 0 {
            stream.responseBody.withUnsafeBytes { source in
                buffer.copyMemory(
                    from: UnsafeRawBufferPointer(
                        rebasing: source[stream.responseOffset..<stream.responseOffset + count]))
            }
            stream.responseOffset += count
            stream.bytesOut &+= UInt64(count)
            // An HTTP/2 upstream's stream may send as much again.
            if let upstream = stream.http2Upstream { upstream.consume(stream.http2UpstreamStreamID, count) }
            if stream.responseOffset == stream.responseBody.count {
                stream.responseBody.removeAll(keepingCapacity: stream.responseBody.capacity <= 64 * 1024)
                stream.responseOffset = 0
            }
            // Room again: its upstream may be read further.
            if stream.upstream != nil {
                self.needsRelay(stream)
                self.repump = true
            }
        }
        let last = stream.responseComplete && stream.pendingResponseBytes == 0
        return (count, last, last ? stream.responseTrailers : [])
    }
}
