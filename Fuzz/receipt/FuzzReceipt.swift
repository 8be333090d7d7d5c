// libFuzzer harness over the receipt code: the bounded DER/BER reader (every element walked
// to the depth cap), the receipt payload parser, RFC 3339 times, and the full ReceiptVerifier
// (Apple root only, and fixed time so runs reproduce). Built by Fuzz/receipt/run.sh together
// with the Verification sources it needs into one module.
import Foundation
import Verification

private let fuzzVerifier: ReceiptVerifier? = try? ReceiptVerifier()
private let fuzzTime = Date(timeIntervalSince1970: 1_605_996_782)

/// Walks every element below `element` (children, integers, OIDs, octet strings): each
/// accessor must give a value or a typed error on any input.
private func walk(_ element: ASN1Element, _ limits: ASN1Limits, budget: inout Int) {
    budget -= 1
    guard budget > 0 else { return }
    _ = try? element.integerValue(limits: limits)
    _ = try? element.objectIdentifier(limits: limits)
    _ = try? element.octetStringBytes(limits: limits)
    guard element.identifier.isConstructed, let children = try? element.children(limits: limits) else { return }
    for child in children { walk(child, limits, budget: &budget) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzReceiptOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))

    for limits in [ASN1Limits.der(errorCode: .malformedReceipt), ASN1Limits.ber(errorCode: .malformedReceipt)] {
        if let element = try? ASN1Reader.parseSingle(bytes, limits: limits) {
            var budget = 4096
            walk(element, limits, budget: &budget)
        }
    }
    _ = try? Receipt(payload: bytes)
    _ = RFC3339.parse(bytes)
    if let verifier = fuzzVerifier {
        _ = try? verifier.verify(receipt: bytes, appID: nil, publicKey: nil, at: nil)
        _ = try? verifier.verify(
            receipt: bytes, appID: "6MURL8TA57.de.vincent-haupert.apple-appattest-poc",
            publicKey: [4] + [UInt8](repeating: 1, count: 64), at: fuzzTime)
    }
    OpenSSLErrorQueue.clear()
    return 0
}
