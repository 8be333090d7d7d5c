// Throughput of the HTTP/1.1 layer on one core, for the per-request CPU budget (nginx spends
// 10–13 µs per proxied request on this machine kind). Built and run by bench.sh (swiftc -O).
// Not a test: it asserts nothing about time. Measures thread CPU time, so that a busy machine
// (other builds sharing the cores) inflates the numbers less than wall time would.

#if canImport(Glibc)
    private import Glibc
#endif

@main
struct HTTPParserBench {
    static func main() {
        let assertion = String(repeating: "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo", count: 6)
        let request = Array(
            ("GET /v1/premium/items?id=42&page=3 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk/4.2\r\n"
                + "Accept: application/json\r\nAccept-Encoding: gzip, br\r\nConnection: keep-alive\r\n"
                + "X-App-Attest-Key-Id: dGhpcyBpcyBhIGtleSBpZCBmb3IgdGVzdHM=\r\nX-App-Assertion: \(assertion)\r\n\r\n")
                .utf8
        )
        let post = Array(
            "POST /v1/upload HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n\(String(repeating: "x", count: 256))\r\n0\r\n\r\n"
                .utf8
        )
        let response = Array(
            ("HTTP/1.1 200 OK\r\nServer: upstream\r\nDate: Sun, 22 Nov 2026 01:00:00 GMT\r\n"
                + "Content-Type: application/json\r\nContent-Length: 27\r\nConnection: keep-alive\r\n\r\n"
                + "{\"id\":42,\"name\":\"example\"}")
                .utf8
        )
        let iterations = 1_000_000
        var sink = 0

        var elapsed = Self.cpuTime {
            var parser = HTTPRequestParser()
            request.withUnsafeBytes { buffer in
                for _ in 0..<iterations {
                    if case .head(let head, _)? = parser.next(buffer).event { sink &+= head.headers.count }
                    _ = parser.next(UnsafeRawBufferPointer(rebasing: buffer[buffer.count...]))
                }
            }
        }
        Self.report("parse GET head (\(request.count) B, 8 fields)", elapsed, iterations)

        elapsed = Self.cpuTime {
            var parser = HTTPRequestParser()
            post.withUnsafeBytes { buffer in
                for _ in 0..<iterations {
                    var offset = 0
                    while true {
                        let (event, consumed) = parser.next(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
                        offset += consumed
                        if event == nil { break }
                        if case .end? = event { break }
                    }
                    sink &+= offset
                }
            }
        }
        Self.report("parse chunked POST (\(post.count) B)", elapsed, iterations)

        elapsed = Self.cpuTime {
            var parser = HTTPRequestParser()
            var out: [UInt8] = []
            out.reserveCapacity(2048)
            request.withUnsafeBytes { buffer in
                for _ in 0..<iterations {
                    guard case .head(let head, _)? = parser.next(buffer).event else { continue }
                    _ = parser.next(UnsafeRawBufferPointer(rebasing: buffer[buffer.count...]))
                    let upstream = HeaderRewriting.upstreamRequest(head, clientAddress: "127.0.0.1", scheme: "http")
                    out.removeAll(keepingCapacity: true)
                    HTTPSerializer.writeRequestHead(upstream, into: &out)
                    sink &+= out.count
                }
            }
        }
        Self.report("parse + rewrite + serialize request head", elapsed, iterations)

        var parsedHead: HTTPRequestHead?
        request.withUnsafeBytes { buffer in
            var parser = HTTPRequestParser()
            if case .head(let head, _)? = parser.next(buffer).event { parsedHead = head }
        }
        if let head = parsedHead {
            elapsed = Self.cpuTime {
                for _ in 0..<iterations {
                    let upstream = HeaderRewriting.upstreamRequest(head, clientAddress: "127.0.0.1", scheme: "http")
                    sink &+= upstream.headers.count
                }
            }
            Self.report("rewrite request head only", elapsed, iterations)
            elapsed = Self.cpuTime {
                var out: [UInt8] = []
                out.reserveCapacity(2048)
                for _ in 0..<iterations {
                    out.removeAll(keepingCapacity: true)
                    HTTPSerializer.writeRequestHead(head, into: &out)
                    sink &+= out.count
                }
            }
            Self.report("serialize request head only", elapsed, iterations)
        }

        elapsed = Self.cpuTime {
            var parser = HTTPResponseParser()
            var out: [UInt8] = []
            out.reserveCapacity(2048)
            response.withUnsafeBytes { buffer in
                for _ in 0..<iterations {
                    parser.expectResponse(toMethod: "GET")
                    var offset = 0
                    while true {
                        let (event, consumed) = parser.next(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
                        offset += consumed
                        guard let event else { break }
                        if case .head(let head, _) = event {
                            out.removeAll(keepingCapacity: true)
                            HTTPSerializer.writeResponseHead(HeaderRewriting.clientResponse(head), into: &out)
                        }
                        if case .end = event { break }
                    }
                    sink &+= out.count
                }
            }
        }
        Self.report("parse + rewrite + serialize response", elapsed, iterations)
        print("(checksum \(sink))")
    }

    /// CPU time of the calling thread spent in `body`, in nanoseconds.
    static func cpuTime(_ body: () -> Void) -> Double {
        func now() -> Double {
            var spec = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
            return Double(spec.tv_sec) * 1e9 + Double(spec.tv_nsec)
        }
        let start = now()
        body()
        return now() - start
    }

    static func report(_ name: String, _ nanoseconds: Double, _ iterations: Int) {
        let perOp = nanoseconds / Double(iterations)
        let rate = 1e9 / perOp
        print(
            name + String(repeating: " ", count: max(1, 48 - name.count))
                + " \(Int(perOp)) ns/op  \(Int(rate / 1000)) k op/s"
        )
    }
}
