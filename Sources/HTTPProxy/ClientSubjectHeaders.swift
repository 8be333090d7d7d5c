package import HTTP1

/// The header names that carry a verified client certificate subject upstream
/// (`GatewayPolicy.clientSubjectHeaderNames`: the default `X-Client-Cert-Subject` and every
/// listener's `tls.client_subject_header`). No client may send them, on any listener: an
/// upstream that trusts the header must only ever see the gateway's own value. The head writer
/// strips every copy the client sent (and from trailers), then adds the verified subject when
/// the connection has one.
package struct ClientSubjectHeaders: Sendable, Hashable {
    /// Without duplicates (ASCII case-insensitive). An array, not a set: there are one or two,
    /// and `isReserved` runs for every field of every request, so it must not allocate.
    private let names: [String]

    package init(_ names: [String]) {
        var unique: [String] = []
        for name in names where !unique.contains(where: { $0.equalsCaseInsensitiveASCII(name) }) {
            unique.append(name)
        }
        self.names = unique
    }

    /// True for a field no client may send (ASCII case-insensitive).
    @inline(__always)
    package func isReserved(_ name: String) -> Bool {
        let count = name.utf8.count
        for reserved in self.names where reserved.utf8.count == count {
            if reserved.equalsCaseInsensitiveASCII(name) { return true }
        }
        return false
    }

    /// Removes every reserved field, then adds `subject` under `header` (the listener's
    /// `tls.client_subject_header`) when the client presented a verified certificate.
    package func rewrite(_ headers: inout HTTPHeaders, subject: String?, header: String) {
        headers.removeAll { self.isReserved($0.name) }
        if let subject { headers.add(name: header, value: Self.fieldValue(subject)) }
    }

    /// `subject` fit for a field value: control characters (a DN may carry any byte in an
    /// escaped attribute) become `\xNN`, so they cannot end the field or the head.
    package static func fieldValue(_ subject: String) -> String {
        var value = ""
        value.reserveCapacity(subject.utf8.count)
        for scalar in subject.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                value += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            } else {
                value.unicodeScalars.append(scalar)
            }
        }
        return value
    }
}
