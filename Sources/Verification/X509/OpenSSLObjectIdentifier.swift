private import COpenSSL

/// An OpenSSL `ASN1_OBJECT` made once from a dotted OID and shared read-only.
final class OpenSSLObjectIdentifier: @unchecked Sendable {
    // Sendable: never mutated after init; OpenSSL only reads it.
    let pointer: OpaquePointer  // ASN1_OBJECT *
    let dotted: String

    init(_ dotted: String) throws(VerificationError) {
        guard let object = OBJ_txt2obj(dotted, 1) else {
            throw OpenSSLErrorQueue.internalError("OBJ_txt2obj(\(dotted))")
        }
        self.pointer = object
        self.dotted = dotted
    }

    deinit {
        ASN1_OBJECT_free(self.pointer)
    }
}
