/// `http2:` and HTTP/2 upstream warnings (docs/operations.md "HTTP/2", "HTTP/2 upstreams").
extension PolicyLint {
    /// - `http2_small_window`: `http2.initial_window_size` below HTTP/2's own default (65,535):
    ///   a client uploads at most one window per round trip, so a 100 ms mobile link with a
    ///   16 KiB window moves 160 KiB/s per stream whatever its bandwidth.
    /// - `setting_without_effect`: an `http2:` block where no listener speaks HTTP/2 (no `tls`
    ///   listener with `http2` on, no `h2c: true` listener); `upstreams.NAME.idle_timeout` or `.ping_interval` on an
    ///   `http1` upstream (its pooled connections follow the HTTP/1.1 keep-alive rules).
    func http2Warnings(_ policy: GatewayPolicy, top: Fields) -> [PolicyWarning] {
        var warnings: [PolicyWarning] = []
        if let block = top["http2"] {
            let http2 = policy.http2
            if http2.initialWindowSize < HTTP2Policy.smallWindow,
                let entry = Self.entry(block, "initial_window_size")
            {
                warnings.append(
                    PolicyWarning(
                        code: "http2_small_window", file: self.file, line: entry.keyMark.line,
                        column: entry.keyMark.column, field: entry.value.path,
                        message:
                            "a stream's window of \(http2.initialWindowSize) bytes (below HTTP/2's default 65535) caps each upload at one window per round trip: 160 KiB/s at 16 KiB and 100 ms"
                    ))
            }
            let speaksHTTP2 = (policy.listeners + (policy.authzListener.map { [$0] } ?? [])).contains {
                $0.h2c || ($0.tls?.http2 ?? false)
            }
            if !speaksHTTP2 {
                warnings.append(
                    PolicyWarning(
                        code: "setting_without_effect", file: self.file, line: top.keyMark("http2").line,
                        column: top.keyMark("http2").column, field: top.path("http2"),
                        message:
                            "has no effect: no listener speaks HTTP/2 (a tls listener with http2 on, or a plain one with h2c: true)"
                    ))
            }
        }
        if let upstreams = top["upstreams"], case .mapping(let entries) = upstreams.content {
            for upstream in entries {
                guard policy.upstreams[upstream.key]?.wireProtocol == .http1 else { continue }
                for key in ["idle_timeout", "ping_interval"] {
                    guard let entry = Self.entry(upstream.value, key) else { continue }
                    warnings.append(
                        PolicyWarning(
                            code: "setting_without_effect", file: self.file, line: entry.keyMark.line,
                            column: entry.keyMark.column, field: entry.value.path,
                            message:
                                "has no effect: \(key) applies to protocol h2 and h2c upstreams; upstream \(PolicyScalarReader.quote(upstream.key)) speaks http1"
                        ))
                }
            }
        }
        return warnings
    }

    private static func entry(_ node: YAMLNode, _ key: String) -> YAMLEntry? {
        guard case .mapping(let entries) = node.content else { return nil }
        return entries.first { $0.key == key }
    }
}
