// Throughput of the HTTP/1.1 parsers and head writers (the HTTP1 module) on one core, for the
// per-request CPU budget (nginx spends 10–13 µs per proxied request on this machine kind).
// Built and run by scripts/bench-http.sh (release). Not a test: it asserts nothing about time.
// Measures thread CPU time, so that a busy machine (other builds sharing the cores) inflates the
// numbers less than wall time would. The gateway's own head rewriting and writing
// (`UpstreamRequestPlan.writeHead`, `ClientResponsePlan`) is measured end to end, per proxied
// request, by scripts/cpu-per-request.sh.
//
//   http-bench [ITERATIONS]   (default 1000000)

import HTTP1

#if canImport(Glibc)
    import Glibc
#endif

@main
struct HTTPBench {
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
        let iterations = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 1_000_000
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
                            HTTPSerializer.writeResponseHead(head, into: &out)
                        }
                        if case .end = event { break }
                    }
                    sink &+= out.count
                }
            }
        }
        Self.report("parse response + serialize its head", elapsed, iterations)
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
