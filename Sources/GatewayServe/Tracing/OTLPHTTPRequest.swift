import GatewayIO
package import PolicyModel

/// The OTLP/HTTP side of an export (https://opentelemetry.io/docs/specs/otlp/#otlphttp), as
/// pure functions: the `POST` written for a batch, and what a collector's answer means.
package enum OTLPHTTPRequest {
    /// What to do after an answer (or its absence).
    package enum Outcome: Sendable, Hashable {
        /// 2xx: the collector took the batch (a partial success is still a success: the spec
        /// says not to retry it).
        case accepted
        /// 429, 502, 503, 504 (the spec's retryable codes): try the batch again, after
        /// `Retry-After` seconds when the answer has one.
        case retry(afterSeconds: Int?)
        /// Any other status: the batch is dropped (`rejected`); retrying would fail the same way.
        case rejected
    }

    /// `status` and the answer's `Retry-After` value (delta-seconds only; a date is ignored).
    package static func outcome(status: Int, retryAfter: String?) -> Outcome {
        switch status {
        case 200..<300: return .accepted
        case 429, 502, 503, 504:
            var seconds: Int?
            if let retryAfter, !retryAfter.isEmpty, retryAfter.utf8.count <= 5,
                retryAfter.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
            {
                seconds = Int(retryAfter)
            }
            return .retry(afterSeconds: seconds)
        default: return .rejected
        }
    }

    /// The whole request for `body`: `POST path`, `Host`, `Content-Type: application/x-protobuf`,
    /// `Content-Length`, the configured headers, `Connection: close` (one request per
    /// connection: an export is a few a minute at most).
    package static func bytes(endpoint: TracingPolicy.Endpoint, headers: [TracingPolicy.Header], body: [UInt8])
        -> [UInt8]
    {
        let defaultPort: UInt16 = endpoint.usesTLS ? 443 : 80
        let hostName = endpoint.host.contains(":") ? "[\(endpoint.host)]" : endpoint.host
        let host = endpoint.port == defaultPort ? hostName : "\(hostName):\(endpoint.port)"
        var head = "POST \(endpoint.path) HTTP/1.1\r\nHost: \(host)\r\n"
        head += "Content-Type: application/x-protobuf\r\nContent-Length: \(body.count)\r\n"
        head += "User-Agent: attest-gateway\r\nConnection: close\r\n"
        for header in headers { head += "\(header.name): \(header.value)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }

    /// Wait before retry `attempt` (1, 2, ...): `Retry-After` when given (capped at 60 s), else
    /// 1 s doubled per attempt up to 30 s.
    package static func backoffNanoseconds(attempt: Int, retryAfterSeconds: Int?) -> UInt64 {
        if let retryAfterSeconds { return UInt64(min(max(retryAfterSeconds, 0), 60)) * 1_000_000_000 }
        let seconds = min(UInt64(1) << UInt64(min(max(attempt - 1, 0), 5)), 30)
        return seconds * 1_000_000_000
    }
}
