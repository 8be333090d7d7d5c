// libFuzzer harness over `HTTPCacheControl.maxAge`, the reader of the `Cache-Control` header of
// Google's revocation status list answer (how long the fetched list may be used). The bytes are
// the header's value (as UTF-8, invalid sequences replaced). Invariants: no crash; a header over
// `maximumHeaderBytes` is not read; a value is within 0 ... `maximumSeconds` and only comes from
// a header naming `max-age`; the value printed back as `max-age=N` reads as itself; a header
// with `no-store` or `no-cache` added before or after gives no value; the reading does not depend on
// the case of the directive names.
import GoogleClient

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCacheControlOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let header = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let maxAge = HTTPCacheControl.maxAge(header)
    guard header.utf8.count <= HTTPCacheControl.maximumHeaderBytes else {
        precondition(maxAge == nil, "a header over the size bound was read")
        return 0
    }
    if let maxAge {
        let seconds = maxAge.components.seconds
        precondition(maxAge.components.attoseconds == 0, "a max-age with a fraction of a second")
        precondition((0...Int64(HTTPCacheControl.maximumSeconds)).contains(seconds), "max-age out of bounds")
        precondition(header.lowercased().contains("max-age"), "a max-age from a header without one")
        precondition(HTTPCacheControl.maxAge("max-age=\(seconds)") == maxAge, "max-age does not read back")
        precondition(HTTPCacheControl.maxAge("private, max-age=\"\(seconds)\"") == maxAge, "quoted max-age differs")
    }
    for refusal in ["no-store, " + header, header + ", NO-CACHE"]
    where refusal.utf8.count <= HTTPCacheControl.maximumHeaderBytes {
        precondition(HTTPCacheControl.maxAge(refusal) == nil, "no-store/no-cache did not refuse reuse")
    }
    // Directive names are case-insensitive (upper-casing ASCII leaves the digits as they are).
    if header.utf8.allSatisfy({ $0 < 0x80 }) {
        precondition(HTTPCacheControl.maxAge(header.uppercased()) == maxAge, "the reading depends on case")
    }
    return 0
}
