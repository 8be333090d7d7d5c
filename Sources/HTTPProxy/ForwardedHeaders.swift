package import HTTP1

/// The forwarding headers a request carries upstream (`X-Forwarded-For`, `-Proto`, `-Host`,
/// RFC 7239 `Forwarded`, and `X-Real-IP`), by the `trusted_proxies` rule:
///
/// - from a trusted peer (a load balancer in `trusted_proxies`), what it sent is kept:
///   `X-Forwarded-For` and `Forwarded` get this hop appended; its `X-Forwarded-Proto` and
///   `X-Forwarded-Host` describe the client's own connection, so they stand, and only fill in
///   when it sent none; its `X-Real-IP` does not stand: `X-Real-IP` is the client
///   address the gateway itself derives from that `X-Forwarded-For` (`TrustedProxies.clientAddress`,
///   the address it logs and limits), as nginx's realip module with `real_ip_recursive on`
///   makes `$remote_addr` (docs/design-notes.md, "Headers other proxies set");
/// - from any other peer, all five are replaced by what this gateway saw: a client cannot
///   plant an address, a scheme or a host for the upstream to believe.
///
/// The scheme is `https` when TLS ended at this gateway, else `http`. Pure: the head writer
/// turns the plan into fields.
package struct ForwardedHeaders: Sendable, Hashable {
    /// `X-Forwarded-For`: comma-separated addresses, this hop's last.
    package var forwardedFor: String
    /// `X-Forwarded-Proto`.
    package var forwardedProto: String
    /// `X-Forwarded-Host`; nil when the request has no Host and none was forwarded.
    package var forwardedHost: String?
    /// `Forwarded` (RFC 7239): comma-separated elements, this hop's (`for=...;proto=...;host=...`) last.
    package var forwarded: String
    /// `X-Real-IP`: one address, the client's.
    package var realIP: String

    /// The forwarding fields as received, one entry per field line, in order.
    package struct Incoming: Sendable, Hashable {
        package var forwardedFor: [String]
        package var forwardedProto: [String]
        package var forwardedHost: [String]
        package var forwarded: [String]

        package init(
            forwardedFor: [String] = [],
            forwardedProto: [String] = [],
            forwardedHost: [String] = [],
            forwarded: [String] = []
        ) {
            self.forwardedFor = forwardedFor
            self.forwardedProto = forwardedProto
            self.forwardedHost = forwardedHost
            self.forwarded = forwarded
        }
    }

    package init(
        forwardedFor: String, forwardedProto: String, forwardedHost: String?, forwarded: String, realIP: String
    ) {
        self.forwardedFor = forwardedFor
        self.forwardedProto = forwardedProto
        self.forwardedHost = forwardedHost
        self.forwarded = forwarded
        self.realIP = realIP
    }

    /// The plan for one request.
    ///
    /// - Parameters:
    ///   - peerIsTrusted: the connection's peer is in `trusted_proxies`. With the PROXY protocol
    ///     the peer is the header's source, not the L4 balancer: the balancer relays the
    ///     client's bytes untouched, so a client's X-Forwarded-For behind it proves nothing
    ///     (docs/design-notes.md, "PROXY protocol trust").
    ///   - tlsEndedHere: this gateway terminated TLS for the request.
    ///   - incoming: the forwarding fields the request arrived with.
    ///   - clientAddress: the address this hop received the request from, without port or
    ///     brackets: the socket peer, or the PROXY protocol header's source.
    ///   - host: the request's Host field, if any.
    ///   - originAddress: from a trusted peer, the client address by the `trusted_proxies` rule
    ///     (`TrustedProxies.clientAddress`: the right-most untrusted `X-Forwarded-For` hop), which
    ///     `X-Real-IP` carries; nil: `clientAddress`. Not read for any other peer.
    package static func plan(
        peerIsTrusted: Bool,
        tlsEndedHere: Bool,
        incoming: Incoming,
        clientAddress: String,
        host: String?,
        originAddress: String? = nil
    ) -> ForwardedHeaders {
        let scheme = tlsEndedHere ? "https" : "http"
        var element = "for=" + HeaderRewriting.forwardedNode(clientAddress)
        element += ";proto=" + scheme
        if let host { element += ";host=" + HeaderRewriting.forwardedValue(host) }
        guard peerIsTrusted else {
            return ForwardedHeaders(
                forwardedFor: clientAddress, forwardedProto: scheme, forwardedHost: host, forwarded: element,
                realIP: clientAddress)
        }
        return ForwardedHeaders(
            forwardedFor: Self.appending(clientAddress, to: incoming.forwardedFor),
            forwardedProto: Self.joined(incoming.forwardedProto) ?? scheme,
            forwardedHost: Self.joined(incoming.forwardedHost) ?? host,
            forwarded: Self.appending(element, to: incoming.forwarded),
            realIP: originAddress ?? clientAddress
        )
    }

    /// Why forwarding fields from a trusted peer cannot be believed, or nil when they can.
    ///
    /// X-Forwarded-For and Forwarded are lists: several lines are one list (RFC 9110 §5.3).
    /// X-Forwarded-Proto and X-Forwarded-Host describe one connection: two lines, a list, or a
    /// scheme other than `http` / `https` leave the upstream to guess which one is true, and a
    /// gateway that forwarded them would let whoever wrote the second one choose. Such a request
    /// is refused (400 `invalid_forwarded_header`) rather than passed on or silently replaced:
    /// a trusted proxy that sends them is misconfigured, and the operator should hear of it.
    package static func refusal(in headers: HTTPHeaders) -> String? {
        var proto: [String] = []
        var host: [String] = []
        for field in headers where HeaderRewriting.role(of: field.name) == .forwardedProtoOrHost {
            if field.name.utf8.count == 17 { proto.append(field.value) } else { host.append(field.value) }
        }
        if proto.count > 1 { return "more than one X-Forwarded-Proto field" }
        if host.count > 1 { return "more than one X-Forwarded-Host field" }
        if let value = proto.first?.trimmingASCIIWhitespace(), !value.isEmpty,
            !value.equalsCaseInsensitiveASCII("http") && !value.equalsCaseInsensitiveASCII("https")
        {
            return "X-Forwarded-Proto is neither http nor https"
        }
        if let value = host.first, value.utf8.contains(HTTPByte.comma) {
            return "X-Forwarded-Host holds a list"
        }
        return nil
    }

    /// The field lines as one list value; nil when there are none (or only empty ones).
    private static func joined(_ lines: [String]) -> String? {
        let values = lines.map { $0.trimmingASCIIWhitespace() }.filter { !$0.isEmpty }
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    private static func appending(_ element: String, to lines: [String]) -> String {
        Self.joined(lines).map { $0 + ", " + element } ?? element
    }
}

extension String {
    /// Without leading and trailing spaces and tabs (HTTP's OWS).
    fileprivate func trimmingASCIIWhitespace() -> String {
        var view = Substring(self)
        while let first = view.first, first == " " || first == "\t" { view = view.dropFirst() }
        while let last = view.last, last == " " || last == "\t" { view = view.dropLast() }
        return String(view)
    }
}
