// The reference request-head writer and the 100 Continue line: the proxy writes request heads
// with `UpstreamRequestPlan.writeHead` and answers `Expect: 100-continue` by forwarding the
// request, so only the tests and the fuzz harness (round trip) write these.
package import HTTP1

extension HTTPSerializer {
    /// Request head for the upstream (origin-form target, HTTP/1.1), appended to `out`.
    package static func writeRequestHead(_ head: HTTPRequestHead, into out: inout [UInt8]) {
        Self.appendSanitized(head.method, to: &out)
        out.append(HTTPByte.sp)
        Self.appendSanitized(head.target, to: &out)
        Self.append(" HTTP/1.1\r\n", to: &out)
        Self.writeFields(head.headers, into: &out)
        Self.append("\r\n", to: &out)
    }

    /// `HTTP/1.1 100 Continue` and the empty line, for `Expect: 100-continue`.
    package static func writeContinue(into out: inout [UInt8]) {
        Self.append("HTTP/1.1 100 Continue\r\n\r\n", to: &out)
    }
}
