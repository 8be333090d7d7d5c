package import GateContract

/// The gateway's own answer to a gRPC request (`content-type: application/grpc*`), as gRPC
/// clients expect it: HTTP 200, trailers-only (one HEADERS frame that ends the stream) with
/// `grpc-status` and the stable code in `grpc-message`. A gRPC client then sees a status code,
/// not a protocol error. The mapping is docs/protocol.md's "gRPC" table.
package struct GRPCRefusal: Sendable, Hashable {
    /// gRPC status codes the gateway answers with.
    package enum Status: Int, Sendable, Hashable, CaseIterable {
        case unknown = 2
        case invalidArgument = 3
        case deadlineExceeded = 4
        case alreadyExists = 6
        case permissionDenied = 7
        case resourceExhausted = 8
        case unimplemented = 12
        case unavailable = 14
        case unauthenticated = 16
    }

    package var status: Status
    /// The stable code (`assertion_missing`, `store_error`, …), as the JSON answer's `error`.
    package var code: String

    /// The refusal for the gateway's answer `response` (its status and JSON `error` code).
    package init(_ response: LocalResponse) {
        let code = Self.errorCode(in: response.body) ?? "http_\(response.status)"
        self.code = code
        self.status = Self.status(httpStatus: response.status, code: code)
    }

    /// 16 for missing or bad credentials, 7 for a refusal, 8 for a limit, 14 for an outage
    /// (the store, Apple, the upstream), and the nearest gRPC meaning for the rest.
    static func status(httpStatus: Int, code: String) -> Status {
        switch code {
        case "store_error", "devicecheck_unavailable", "upstream_unavailable", "upstream_invalid_response",
            "upstream_tls_error", "upstream_tls_certificate_expired", "upstream_tls_hostname_mismatch",
            "upstream_tls_unknown_ca":
            return .unavailable
        case "body_budget_exhausted", "upstream_busy", "rate_limited", "body_too_large":
            return .resourceExhausted
        case "grpc_upstream_not_http2":
            return .unimplemented
        default:
            break
        }
        switch httpStatus {
        case 401, 428: return .unauthenticated
        case 403: return .permissionDenied
        case 413, 429, 431: return .resourceExhausted
        case 400: return .invalidArgument
        case 404, 405: return .unimplemented
        case 408, 504: return .deadlineExceeded
        case 409: return .alreadyExists
        case 502, 503: return .unavailable
        default: return .unknown
        }
    }

    /// The HEADERS of the trailers-only answer (after `:status 200`).
    package var headers: [(String, String)] {
        [
            ("content-type", "application/grpc"), ("grpc-status", String(self.status.rawValue)),
            ("grpc-message", self.code),
        ]
    }

    /// The `error` of the gateway's JSON answer (`{"error":"code",…}`, `LocalResponse.jsonError`).
    static func errorCode(in body: [UInt8]) -> String? {
        let prefix = Array(#"{"error":""#.utf8)
        guard body.starts(with: prefix) else { return nil }
        var code: [UInt8] = []
        for byte in body[prefix.count...] {
            if byte == UInt8(ascii: "\"") { return code.isEmpty ? nil : String(decoding: code, as: UTF8.self) }
            guard
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || byte == UInt8(ascii: "_")
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")), code.count < 64
            else { return nil }
            code.append(byte)
        }
        return nil
    }
}
