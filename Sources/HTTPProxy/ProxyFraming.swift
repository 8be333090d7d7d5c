import GateContract
import GatewayIO
package import HTTP1
import PolicyModel

/// How a body is written on the wire after the proxy re-framed it.
package enum BodyEncoding: Sendable, Hashable {
    /// No body bytes at all.
    case none
    /// Bytes as they are (Content-Length, or a close-delimited body).
    case identity
    /// `Transfer-Encoding: chunked`.
    case chunked
}

/// The head the upstream receives and how its body is framed (pure; tested without sockets).
/// The proxy writes it with `writeHead`; the reference that builds it as a value (`make`, for the
/// tests) is in GatewayTesting.
package struct UpstreamRequestPlan: Sendable {
    package var head: HTTPRequestHead
    package var encoding: BodyEncoding

    package init(head: HTTPRequestHead, encoding: BodyEncoding) {
        self.head = head
        self.encoding = encoding
    }

    /// POST, PUT and PATCH: without a body they still get `Content-Length: 0`.
    @inline(__always)
    package static func isMethodWithBody(_ method: String) -> Bool {
        method == "POST" || method == "PUT" || method == "PATCH"
    }

    /// The client as `upstreamRequest` adds it: its address (X-Forwarded-For) and its RFC 7239
    /// node (Forwarded), computed once per connection; whether its peer is a trusted proxy, the
    /// address X-Real-IP names, the header lists and its verified certificate subject, set per
    /// request (a reload may change the peer's trust and the lists).
    struct Client {
        let address: String
        let forwardedNode: String
        /// `https` when TLS ended at this gateway (X-Forwarded-Proto, `Forwarded: proto=`).
        let scheme: StaticString
        /// The peer is in `trusted_proxies`: its forwarding fields are kept and appended to
        /// (`ForwardedHeaders.plan`); otherwise they are replaced.
        var peerIsTrusted = false
        /// From a trusted peer, the client address by the `trusted_proxies` rule (the right-most
        /// untrusted X-Forwarded-For hop), which X-Real-IP names; nil: `address`. Not read when
        /// the peer is not trusted.
        var originAddress: String?
        /// Field names no client may send (every listener's client subject header).
        var reservedSubjectHeaders = ClientSubjectHeaders([ListenerTLSConfiguration.defaultClientSubjectHeader])
        /// The headers other proxies set to name the client (`strip_client_headers` included):
        /// client copies are dropped; X-Real-IP is written by the gateway.
        var trustHeaders = ClientTrustHeaders()
        /// The listener's `tls.client_subject_header`.
        var subjectHeader = ListenerTLSConfiguration.defaultClientSubjectHeader
        /// The verified client certificate's subject, already fit for a field value
        /// (`ClientSubjectHeaders.fieldValue`); nil without one.
        var subject: String?

        init(address: String, tlsEndedHere: Bool = false) {
            self.address = address
            self.forwardedNode = HeaderRewriting.forwardedNode(address)
            self.scheme = tlsEndedHere ? "https" : "http"
        }
    }

    /// Room for `writeHead` (generous: the added fields repeat and may quote the client's values).
    /// `client` is `inout` only so that the connection's stored value is passed without a copy
    /// (see `writeHead`); it is not changed.
    static func headBound(
        gateHead: HTTPRequestHead, client: inout Client, upstreamHost: String, requestID: RequestID
    ) -> Int {
        var fields = 0
        for field in gateHead.headers { fields += field.name.utf8.count + field.value.utf8.count + 4 }
        let subject = client.subject.map { $0.utf8.count + client.subjectHeader.utf8.count + 4 } ?? 0
        let realIP = (client.originAddress?.utf8.count ?? 0) + client.address.utf8.count + 13
        return gateHead.method.utf8.count + gateHead.target.utf8.count + 16 + 4 * fields
            + 4 * (client.address.utf8.count + client.forwardedNode.utf8.count + upstreamHost.utf8.count) + subject
            + realIP + requestID.utf8Count + 16 + 256
    }

    /// Writes what `make` followed by `HTTPSerializer.writeRequestHead(plan.head)` writes, byte for
    /// byte, without building the rewritten head (the proxy's path for every request; tests
    /// compare the two). `writer` needs `headBound(…)` bytes of room. Returns the plan's encoding.
    ///
    /// The forwarding fields follow `ForwardedHeaders.plan` (the reference builds them with it):
    /// from a trusted peer its X-Forwarded-For and Forwarded lists get this hop appended and its
    /// X-Forwarded-Proto / -Host stand; from any other peer all four are this hop's alone.
    /// X-Real-IP (after X-Forwarded-For) is `client.originAddress` from a trusted peer, else the
    /// address X-Forwarded-For ends with. Client copies of the client subject header and of the
    /// other headers proxies set to name the client (`client.trustHeaders`) are dropped; the
    /// verified subject is added (last, so it is sent even under one of those names).
    /// Every `X-Request-Id` the request carried is dropped and `correlation.requestID` written
    /// after `Forwarded`; `traceparent` and `tracestate` stay where they were when
    /// `correlation.traceparent` is set (valid), and are dropped otherwise.
    ///
    /// `upgradesToWebSocket`: the request is a WebSocket upgrade the gate let through on a
    /// `websocket: true` route; `Connection: Upgrade` and `Upgrade: websocket` are written (the
    /// client's `Sec-WebSocket-*` fields are end-to-end and pass as they are).
    ///
    /// `client` is `inout` only to pass the connection's stored value without copying it: a copy
    /// retained and released each of its references, about 400 instructions per request
    /// (callgrind, `scripts/cpu-per-request.sh instructions`). It is not changed.
    static func writeHead(
        gateHead head: HTTPRequestHead,
        framing: RequestBodyFraming,
        bufferedBodyCount: Int?,
        client: inout Client,
        upstreamHost: String,
        correlation: RequestCorrelation,
        upgradesToWebSocket: Bool = false,
        into writer: inout HeadWriter
    ) -> BodyEncoding {
        writer.writeSanitized(head.method)
        writer.write(HTTPByte.sp)
        writer.writeSanitized(head.target)
        writer.write(" HTTP/1.1\r\n")

        // HeaderRewriting.upstreamRequest, field by field.
        let named = HeaderRewriting.connectionOptions(head.headers)
        let trusted = client.peerIsTrusted
        var host: String?
        var forwardedForCount = 0
        var forwardedCount = 0
        var forwardedProtoOrHostCount = 0
        let keepsTraceContext = correlation.traceparent != nil
        for field in head.headers {
            switch HeaderRewriting.role(of: field.name) {
            case .hopByHop, .expect, .requestID:
                continue
            case .traceparent, .tracestate:
                if !keepsTraceContext { continue }
            case .forwardedProtoOrHost:
                forwardedProtoOrHostCount += 1
                continue
            case .forwardedFor:
                forwardedForCount += 1
                continue
            case .forwarded:
                forwardedCount += 1
                continue
            case .host:
                // Never hop-by-hop: `Connection: Host` must not leave the upstream without one.
                if host == nil { host = field.value }
                writer.writeField(field.name, field.value)
                continue
            case .userAgent, .other:
                break
            }
            if client.reservedSubjectHeaders.isReserved(field.name) || client.trustHeaders.contains(field.name) {
                continue
            }
            if !named.isEmpty, named.contains(where: { $0.equalsCaseInsensitiveASCII(field.name) }),
                !IdentityHeaders.isReserved(field.name)
            {
                continue
            }
            writer.writeField(field.name, field.value)
        }
        if host == nil {
            writer.write("Host: ")
            writer.writeSanitized(upstreamHost)
            writer.write("\r\n")
        }
        writer.write("X-Forwarded-For: ")
        if trusted && forwardedForCount > 0 {
            Self.writeListValues(in: head.headers, into: &writer) { HeaderRewriting.role(of: $0) == .forwardedFor }
        }
        writer.writeSanitized(client.address)
        writer.write("\r\nX-Real-IP: ")
        if trusted, let origin = client.originAddress {
            writer.writeSanitized(origin)
        } else {
            writer.writeSanitized(client.address)
        }
        writer.write("\r\nX-Forwarded-Proto: ")
        let keepsProto = trusted && forwardedProtoOrHostCount > 0 && Self.hasValue(in: head.headers, Self.isProto)
        if keepsProto {
            Self.writeJoinedValues(in: head.headers, into: &writer, Self.isProto)
        } else {
            writer.write(client.scheme)
        }
        writer.write("\r\n")
        if trusted && forwardedProtoOrHostCount > 0 && Self.hasValue(in: head.headers, Self.isForwardedHost) {
            writer.write("X-Forwarded-Host: ")
            Self.writeJoinedValues(in: head.headers, into: &writer, Self.isForwardedHost)
            writer.write("\r\n")
        } else if let host {
            writer.write("X-Forwarded-Host: ")
            writer.writeSanitized(host)
            writer.write("\r\n")
        }
        writer.write("Forwarded: ")
        if trusted && forwardedCount > 0 {
            Self.writeListValues(in: head.headers, into: &writer) { HeaderRewriting.role(of: $0) == .forwarded }
        }
        writer.write("for=")
        writer.writeSanitized(client.forwardedNode)
        writer.write(";proto=")
        writer.write(client.scheme)
        if let host {
            writer.write(";host=")
            Self.writeForwardedValue(host, into: &writer)
        }
        writer.write("\r\nX-Request-Id: ")
        correlation.requestID.write(into: &writer)
        writer.write("\r\n")
        if let subject = client.subject {
            writer.writeField(client.subjectHeader, subject)
        }
        if upgradesToWebSocket {
            // Hop-by-hop, so dropped above with the client's own: this hop asks for the upgrade
            // the gate let through (`WebSocketUpgrade`), and for nothing else.
            writer.write("Connection: Upgrade\r\nUpgrade: websocket\r\n")
        }

        // make: the framing fields.
        let encoding: BodyEncoding
        if let bufferedBodyCount {
            if bufferedBodyCount > 0 || framing != .none || Self.isMethodWithBody(head.method) {
                writer.write("Content-Length: ")
                writer.writeDecimal(UInt64(max(bufferedBodyCount, 0)))
                writer.write("\r\n")
            }
            encoding = bufferedBodyCount > 0 ? .identity : .none
        } else {
            switch framing {
            case .none:
                if Self.isMethodWithBody(head.method) { writer.write("Content-Length: 0\r\n") }
                encoding = .none
            case .contentLength(let length):
                writer.write("Content-Length: ")
                writer.writeDecimal(length)
                writer.write("\r\n")
                encoding = length > 0 ? .identity : .none
            case .chunked:
                writer.write("Transfer-Encoding: chunked\r\n")
                encoding = .chunked
            }
        }
        writer.write("\r\n")
        return encoding
    }

    private static func isProto(_ name: String) -> Bool {
        name.utf8.count == 17 && name.equalsLowercaseASCII("x-forwarded-proto")
    }

    private static func isForwardedHost(_ name: String) -> Bool {
        name.utf8.count == 16 && name.equalsLowercaseASCII("x-forwarded-host")
    }

    /// A field `matches` with a value that is not only whitespace (`ForwardedHeaders` ignores those).
    private static func hasValue(in headers: HTTPHeaders, _ matches: (String) -> Bool) -> Bool {
        headers.contains { matches($0.name) && !Self.trimmed($0.value).isEmpty }
    }

    /// The values of the fields `matches`, trimmed, empty ones left out, each followed by ", "
    /// (the trusted peer's list, then ours).
    private static func writeListValues(
        in headers: HTTPHeaders, into writer: inout HeadWriter, _ matches: (String) -> Bool
    ) {
        for field in headers where matches(field.name) {
            let value = Self.trimmed(field.value)
            if value.isEmpty { continue }
            writer.writeSanitized(String(value))
            writer.write(", ")
        }
    }

    /// The values of the fields `matches`, trimmed, empty ones left out, joined with ", ".
    private static func writeJoinedValues(
        in headers: HTTPHeaders, into writer: inout HeadWriter, _ matches: (String) -> Bool
    ) {
        var first = true
        for field in headers where matches(field.name) {
            let value = Self.trimmed(field.value)
            if value.isEmpty { continue }
            if !first { writer.write(", ") }
            first = false
            writer.writeSanitized(String(value))
        }
    }

    /// Without leading and trailing spaces and tabs (HTTP's OWS), as `ForwardedHeaders` reads them.
    private static func trimmed(_ value: String) -> Substring {
        var view = Substring(value)
        while let first = view.first, first == " " || first == "\t" { view = view.dropFirst() }
        while let last = view.last, last == " " || last == "\t" { view = view.dropLast() }
        return view
    }

    /// `HeaderRewriting.forwardedValue`: a token as is, anything else as a quoted-string.
    private static func writeForwardedValue(_ value: String, into writer: inout HeadWriter) {
        let written: Void? = value.utf8.withContiguousStorageIfAvailable { bytes in
            if !bytes.isEmpty && bytes.allSatisfy({ HTTPByte.isToken($0) }) {
                writer.write(UnsafeRawBufferPointer(bytes))  // a token holds no CR, LF or NUL
            } else if HTTPSerializer.isFreeOfLineBreaks(bytes)
                && !bytes.contains(where: { $0 == HTTPByte.quote || $0 == HTTPByte.backslash })
            {
                // Nothing to escape (e.g. host:port): quoted as it is.
                writer.write(HTTPByte.quote)
                writer.write(UnsafeRawBufferPointer(bytes))
                writer.write(HTTPByte.quote)
            } else {
                Self.writeQuoted(bytes, into: &writer)
            }
        }
        if written == nil { Self.writeQuoted(Array(value.utf8), into: &writer) }
    }

    /// A quoted-string: `"` and `\` escaped, CR, LF and NUL written as spaces.
    private static func writeQuoted(_ bytes: some Sequence<UInt8>, into writer: inout HeadWriter) {
        writer.write(HTTPByte.quote)
        for byte in bytes {
            if byte == HTTPByte.quote || byte == HTTPByte.backslash { writer.write(HTTPByte.backslash) }
            writer.write(byte == HTTPByte.cr || byte == HTTPByte.lf || byte == 0 ? HTTPByte.sp : byte)
        }
        writer.write(HTTPByte.quote)
    }
}

/// The head the client receives and how the body is framed (pure; tested without sockets).
package struct ClientResponsePlan: Sendable {
    package var head: HTTPResponseHead
    package var encoding: BodyEncoding
    /// The client connection closes after this response.
    package var closeAfter: Bool

    /// - Parameters:
    ///   - upstreamHead: the final response head as the upstream sent it.
    ///   - framing: the upstream's body framing (the parser already applied HEAD/204/304 rules).
    ///   - requestMethod: the client's method.
    ///   - clientVersionMinor: 0 for HTTP/1.0 clients (no chunked encoding for them).
    ///   - keepAlive: the client connection may stay open after this response.
    ///   - requestID: the exchange's `X-Request-Id`; it replaces any the upstream sent. nil: the
    ///     upstream's fields stay as they are (tests of the other rules).
    package static func make(
        upstreamHead: HTTPResponseHead,
        framing: ResponseBodyFraming,
        requestMethod: String,
        clientVersionMinor: Int,
        keepAlive: Bool,
        requestID: String? = nil
    ) -> ClientResponsePlan {
        var head = HeaderRewriting.clientResponse(upstreamHead)
        head.versionMinor = 1
        if let requestID {
            head.headers.removeAll { HeaderRewriting.role(of: $0.name) == .requestID }
            head.headers.add(name: "X-Request-Id", value: requestID)
        }
        var keepAlive = keepAlive
        let encoding: BodyEncoding
        let bodyless =
            requestMethod == "HEAD" || upstreamHead.status == 204 || upstreamHead.status == 304
            || (100..<200).contains(upstreamHead.status)
        if bodyless {
            // HEAD and 304 describe the body they would have had: keep its length.
            if upstreamHead.status != 204, let length = upstreamHead.headers["Content-Length"] {
                head.headers.add(name: "Content-Length", value: length)
            }
            encoding = .none
        } else {
            switch framing {
            case .none:
                head.headers.add(name: "Content-Length", value: "0")
                encoding = .none
            case .contentLength(let length):
                head.headers.add(name: "Content-Length", value: String(length))
                encoding = length > 0 ? .identity : .none
            case .chunked, .untilClose:
                if clientVersionMinor >= 1 {
                    head.headers.add(name: "Transfer-Encoding", value: "chunked")
                    encoding = .chunked
                } else {
                    // HTTP/1.0 knows no chunked encoding: the end of the body is the close.
                    keepAlive = false
                    encoding = .identity
                }
            }
        }
        if !keepAlive {
            head.headers.add(name: "Connection", value: "close")
        } else if clientVersionMinor == 0 {
            head.headers.add(name: "Connection", value: "keep-alive")
        }
        return ClientResponsePlan(head: head, encoding: encoding, closeAfter: !keepAlive)
    }
}

extension ClientResponsePlan {
    /// Writes what `make(upstreamHead:…)` followed by `HTTPSerializer.writeResponseHead` writes,
    /// byte for byte, straight from the upstream's bytes into `output`: no strings, no header
    /// array (the proxy's path for every response; tests compare the two for many heads).
    /// Returns the plan's `encoding` and `closeAfter`.
    static func writeHead(
        _ upstream: HTTPRawResponseHead,
        in buffer: UnsafeRawBufferPointer,
        framing: ResponseBodyFraming,
        requestMethod: String,
        clientVersionMinor: Int,
        keepAlive: Bool,
        requestID: RequestID?,
        into output: IOBuffer
    ) -> (encoding: BodyEncoding, closeAfter: Bool) {
        let status = upstream.status
        var keepAlive = keepAlive
        var fieldBytes = 0
        for field in upstream.fields { fieldBytes += field.name.count + field.value.count + 4 }
        // Status line, the kept fields, X-Request-Id, at most one framing field (a re-added
        // Content-Length value is one of `fieldBytes`'), Connection, the empty line.
        let idBytes = requestID.map { $0.utf8Count + 16 } ?? 0
        let bound = HeadWriter.statusLineBound(reasonCount: upstream.reason.count) + fieldBytes + idBytes + 38 + 24 + 2
        output.reserveWritable(bound)
        var writer = HeadWriter(UnsafeMutableRawBufferPointer(start: output.writablePointer, count: bound))
        writer.writeStatusLine(status, reason: UnsafeRawBufferPointer(rebasing: buffer[upstream.reason]))

        let options =
            upstream.connectionNamesFields
            ? HeaderRewriting.ConnectionOptions(upstream.fields, in: buffer) : HeaderRewriting.ConnectionOptions()
        var bodylessLength: Range<Int>?
        // Tested once: `requestID != nil` in the loop copied the optional for every field.
        let hasRequestID = requestID != nil
        for field in upstream.fields {
            if HeaderRewriting.isHopByHop(buffer, field.name) {
                if bodylessLength == nil && buffer.equalsLowercaseToken(field.name, "content-length") {
                    bodylessLength = field.value
                }
                continue
            }
            if options.names(buffer, field.name) { continue }
            if hasRequestID && field.name.count == 12 && buffer.equalsLowercaseToken(field.name, "x-request-id") {
                continue
            }
            writer.writeField(
                UnsafeRawBufferPointer(rebasing: buffer[field.name]),
                UnsafeRawBufferPointer(rebasing: buffer[field.value]))
        }
        if let requestID {
            writer.write("X-Request-Id: ")
            requestID.write(into: &writer)
            writer.write("\r\n")
        }

        let encoding: BodyEncoding
        let bodyless =
            requestMethod == "HEAD" || status == 204 || status == 304 || (status >= 100 && status < 200)
        if bodyless {
            // HEAD and 304 describe the body they would have had: keep its length.
            if status != 204, let length = bodylessLength {
                writer.write("Content-Length: ")
                writer.write(UnsafeRawBufferPointer(rebasing: buffer[length]))
                writer.write("\r\n")
            }
            encoding = .none
        } else {
            switch framing {
            case .none:
                writer.write("Content-Length: 0\r\n")
                encoding = .none
            case .contentLength(let length):
                writer.write("Content-Length: ")
                writer.writeDecimal(length)
                writer.write("\r\n")
                encoding = length > 0 ? .identity : .none
            case .chunked, .untilClose:
                if clientVersionMinor >= 1 {
                    writer.write("Transfer-Encoding: chunked\r\n")
                    encoding = .chunked
                } else {
                    keepAlive = false
                    encoding = .identity
                }
            }
        }
        if !keepAlive {
            writer.write("Connection: close\r\n")
        } else if clientVersionMinor == 0 {
            writer.write("Connection: keep-alive\r\n")
        }
        writer.write("\r\n")
        output.didWrite(writer.count)
        return (encoding, !keepAlive)
    }
}
