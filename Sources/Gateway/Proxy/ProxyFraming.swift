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
package struct UpstreamRequestPlan: Sendable {
    package var head: HTTPRequestHead
    package var encoding: BodyEncoding

    /// - Parameters:
    ///   - gateHead: the head `decide` forwarded (identity headers already handled by the gate).
    ///   - framing: the client's body framing.
    ///   - bufferedBodyCount: the body's size when it was buffered (the upstream then gets a Content-Length).
    ///   - upstreamHost: `host:port` of the upstream, used as Host when the client sent none (HTTP/1.0).
    package static func make(
        gateHead: HTTPRequestHead,
        framing: RequestBodyFraming,
        bufferedBodyCount: Int?,
        clientAddress: String,
        upstreamHost: String
    ) -> UpstreamRequestPlan {
        // Also removes Expect (100-continue is answered by the gateway itself, see
        // ProxyConnectionStateMachine) and adds Host for HTTP/1.0 requests that had none.
        var head = HeaderRewriting.upstreamRequest(
            gateHead, clientAddress: clientAddress, scheme: "http", upstreamHost: upstreamHost)
        head.versionMinor = 1
        let encoding: BodyEncoding
        if let bufferedBodyCount {
            if bufferedBodyCount > 0 || framing != .none || Self.methodsWithBody.contains(head.method) {
                head.headers.add(name: "Content-Length", value: String(bufferedBodyCount))
            }
            encoding = bufferedBodyCount > 0 ? .identity : .none
        } else {
            switch framing {
            case .none:
                if Self.methodsWithBody.contains(head.method) {
                    head.headers.add(name: "Content-Length", value: "0")
                }
                encoding = .none
            case .contentLength(let length):
                head.headers.add(name: "Content-Length", value: String(length))
                encoding = length > 0 ? .identity : .none
            case .chunked:
                head.headers.add(name: "Transfer-Encoding", value: "chunked")
                encoding = .chunked
            }
        }
        return UpstreamRequestPlan(head: head, encoding: encoding)
    }

    static let methodsWithBody: Set<String> = ["POST", "PUT", "PATCH"]
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
    package static func make(
        upstreamHead: HTTPResponseHead,
        framing: ResponseBodyFraming,
        requestMethod: String,
        clientVersionMinor: Int,
        keepAlive: Bool
    ) -> ClientResponsePlan {
        var head = HeaderRewriting.clientResponse(upstreamHead)
        head.versionMinor = 1
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
        into output: IOBuffer
    ) -> (encoding: BodyEncoding, closeAfter: Bool) {
        let status = upstream.status
        var keepAlive = keepAlive
        var fieldBytes = 0
        for field in upstream.fields { fieldBytes += field.name.count + field.value.count + 4 }
        // Status line, the kept fields, at most one framing field (a re-added Content-Length
        // value is one of `fieldBytes`'), Connection, the empty line.
        let bound = HeadWriter.statusLineBound(reasonCount: upstream.reason.count) + fieldBytes + 38 + 24 + 2
        output.reserveWritable(bound)
        var writer = HeadWriter(UnsafeMutableRawBufferPointer(start: output.writablePointer, count: bound))
        writer.writeStatusLine(status, reason: UnsafeRawBufferPointer(rebasing: buffer[upstream.reason]))

        let options = HeaderRewriting.ConnectionOptions(upstream.fields, in: buffer)
        var bodylessLength: Range<Int>?
        for field in upstream.fields {
            if HeaderRewriting.isHopByHop(buffer, field.name) {
                if bodylessLength == nil && buffer.equalsLowercase(field.name, "content-length") {
                    bodylessLength = field.value
                }
                continue
            }
            if options.names(buffer, field.name) { continue }
            writer.writeField(
                UnsafeRawBufferPointer(rebasing: buffer[field.name]),
                UnsafeRawBufferPointer(rebasing: buffer[field.value]))
        }

        let encoding: BodyEncoding
        let bodyless =
            requestMethod == "HEAD" || status == 204 || status == 304 || (100..<200).contains(status)
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
