/// `tracing:` warnings (docs/operations.md "Traces").
extension PolicyLint {
    /// `tracing_headers_in_clear`: export headers (usually a collector's credentials) sent over
    /// plain `http://` to a host that is not loopback.
    func tracingWarnings(_ policy: GatewayPolicy, top: Fields) -> [PolicyWarning] {
        guard let block = top["tracing"], case .mapping(let entries) = block.content,
            let endpoint = policy.tracing.endpoint, !endpoint.usesTLS, !policy.tracing.headers.isEmpty,
            !Self.isLoopback(endpoint.host),
            let headers = entries.first(where: { $0.key == "headers" })
        else { return [] }
        return [
            PolicyWarning(
                code: "tracing_headers_in_clear", file: self.file, line: headers.keyMark.line,
                column: headers.keyMark.column, field: headers.value.path,
                message:
                    "tracing.headers go to \(endpoint.host) over plain http://: use an https:// endpoint for credentials"
            )
        ]
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}
