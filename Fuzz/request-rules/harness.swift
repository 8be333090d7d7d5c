import HTTP1

// libFuzzer target for the request rules every door runs that read client bytes: the method
// overrides of a head (`HTTPMethodOverrides.read`: override fields, the `_method` query
// parameter with its percent-decoding, form Content-Types) and the Host authority rule
// (`HTTPAuthority.violation`), both in HTTP1. The package's `fuzz-request-rules` target.
//
// Input: line 0 is the method, line 1 the target, line 2 a Host value, the rest header fields
// (`name:value`, split at the first colon).
// Invariants checked on every input (a violation traps, which libFuzzer reports as a crash):
//  1. Every override method found is an upper-case method token of at most 32 bytes, is not the
//     request line's method, and appears once; at most 16 values are read.
//  2. `couldBeAnyMethod` only for a POST that carries a form Content-Type.
//  3. An override field with a method token value (any case) other than the request line's is
//     found, upper-cased, unless the read failed.
//  4. `HTTPAuthority.violation` agrees with `referenceAuthorityIsValid`, written from RFC 3986
//     another way (split at the last ':' outside brackets, then check each part).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestRules(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let lines = input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
        String(decoding: $0, as: UTF8.self)
    }
    let method = lines.first ?? ""
    let target = lines.count > 1 ? lines[1] : "/"
    let host = lines.count > 2 ? lines[2] : ""
    var headers = HTTPHeaders()
    for line in lines.dropFirst(3) {
        let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        headers.add(name: String(parts[0]), value: parts.count > 1 ? String(parts[1]) : "")
    }
    let head = HTTPRequestHead(method: method, target: target, headers: headers)

    switch HTTPMethodOverrides.read(head) {
    case .failure(let invalid):
        check(!invalid.reason.isEmpty, "a refusal says why")
    case .success(let found):
        check(found.methods.count <= 16, "at most 16 values")
        check(Set(found.methods).count == found.methods.count, "each method once")
        for override in found.methods {
            check(override != method, "the request line's method is no override")
            check(!override.isEmpty && override.utf8.count <= 32, "override length")
            check(override.utf8.allSatisfy(HTTPByte.isMethodByte), "override is an upper-case token")
        }
        if found.couldBeAnyMethod {
            check(method == "POST" && HTTPMethodOverrides.hasFormBody(headers), "form POST only")
        }
        for field in headers where HTTPMethodOverrides.isOverrideField(field.name) {
            for element in field.value.split(separator: ",") {
                let value = String(element).trimmingCharacters(in: " \t")
                let upper = value.uppercased()
                if !value.isEmpty, upper != method, upper.utf8.count <= 32, upper.utf8.allSatisfy(HTTPByte.isMethodByte)
                {
                    check(found.methods.contains(upper), "override \(upper) found")
                }
            }
        }
    }

    let accepted = HTTPAuthority.violation(host) == nil
    check(accepted == referenceAuthorityIsValid(host), "authority \(Array(host.utf8)) accepted=\(accepted)")
    return 0
}

/// RFC 3986 `host [ ":" port ]` with host = IP-literal / reg-name (IPv4 is a reg-name here),
/// port 1–5 digits, IP-literal limited to hex digits, ':' and '.'.
func referenceAuthorityIsValid(_ text: String) -> Bool {
    let bytes = Array(text.utf8)
    var hostPart = bytes[...]
    var portPart: ArraySlice<UInt8>? = nil
    let closing = bytes.lastIndex(of: UInt8(ascii: "]"))
    let searchFrom = closing.map { $0 + 1 } ?? 0
    if let colon = bytes[searchFrom...].firstIndex(of: UInt8(ascii: ":")) {
        hostPart = bytes[..<colon]
        portPart = bytes[(colon + 1)...]
    }
    if let port = portPart {
        if port.isEmpty || port.count > 5 || !port.allSatisfy({ (48...57).contains($0) }) { return false }
    }
    if hostPart.first == UInt8(ascii: "[") {
        guard hostPart.count > 2, hostPart.last == UInt8(ascii: "]") else { return false }
        let inner = hostPart.dropFirst().dropLast()
        return inner.allSatisfy { b in
            (48...57).contains(b) || (65...70).contains(b) || (97...102).contains(b) || b == 58 || b == 46
        }
    }
    if hostPart.isEmpty { return false }
    let allowed = Set("-._~!$&'()*+,;=%".utf8)
    return hostPart.allSatisfy { b in
        (48...57).contains(b) || (65...90).contains(b) || (97...122).contains(b) || allowed.contains(b)
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var scalars = Substring(self)
        while let first = scalars.first, set.contains(first) { scalars = scalars.dropFirst() }
        while let last = scalars.last, set.contains(last) { scalars = scalars.dropLast() }
        return String(scalars)
    }
}

func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        print("invariant violated: \(message())")
        fatalError(message())
    }
}
