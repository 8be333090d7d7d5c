public import Foundation

/// Field 6 of a receipt: where it came from.
public enum ReceiptType: String, Sendable {
    /// From the attestation statement (`attStmt.receipt`).
    case attest = "ATTEST"
    /// Refreshed through Apple's fraud-metric endpoint; carries a risk metric.
    case receipt = "RECEIPT"
}

/// The payload of a verified App Attest receipt.
///
/// Layout (Apple, "Assessing fraud risk"): a SET of `SEQUENCE { type INTEGER, version INTEGER,
/// value OCTET STRING }`. Text and times are UTF-8 / RFC 3339 inside the octet strings.
public struct Receipt: Sendable, Hashable {
    /// Field 2: team ID + "." + bundle ID.
    public var appID: String
    /// Field 3: the attested key's certificate (the attestation's credCert), DER.
    public var attestedCertificate: [UInt8]
    /// Field 4: the client data hash of the attestation (opaque bytes).
    public var clientHash: [UInt8]
    /// Field 5: the opaque token Apple's fraud-metric endpoint wants back.
    public var token: String
    /// Field 6.
    public var type: ReceiptType
    /// Field 7, as written in the receipt: `production` or `sandbox` (development).
    public var environment: String
    /// Field 12.
    public var creationTime: Date
    /// Field 17: present in refreshed (`RECEIPT`) receipts.
    public var riskMetric: Int?
    /// Field 19: earliest time to ask Apple for a refreshed receipt (refreshed receipts only).
    public var notBefore: Date?
    /// Field 21: after it Apple will not refresh this receipt.
    public var expirationTime: Date

    public init(
        appID: String,
        attestedCertificate: [UInt8],
        clientHash: [UInt8],
        token: String,
        type: ReceiptType,
        environment: String,
        creationTime: Date,
        riskMetric: Int?,
        notBefore: Date?,
        expirationTime: Date
    ) {
        self.appID = appID
        self.attestedCertificate = attestedCertificate
        self.clientHash = clientHash
        self.token = token
        self.type = type
        self.environment = environment
        self.creationTime = creationTime
        self.riskMetric = riskMetric
        self.notBefore = notBefore
        self.expirationTime = expirationTime
    }
}

/// The field numbers of the receipt payload.
public enum ReceiptField: Int, Sendable, CaseIterable {
    case appID = 2
    case attestedCertificate = 3
    case clientHash = 4
    case token = 5
    case type = 6
    case environment = 7
    case creationTime = 12
    case riskMetric = 17
    case notBefore = 19
    case expirationTime = 21

    /// Fields every receipt carries; a receipt without one is rejected.
    public static let required: [ReceiptField] = [
        .appID, .attestedCertificate, .clientHash, .token, .type, .environment, .creationTime, .expirationTime,
    ]
}

extension Receipt {
    /// Largest payload accepted (Apple's are about 1.2 KiB).
    public static let maximumPayloadSize = 64 * 1024

    /// Parses the signed content of a receipt (already authenticated by the caller).
    ///
    /// Definite lengths, bounded depth and sizes, no trailing bytes. Unknown field types are
    /// skipped (Apple may add fields); a known field given twice is malformed; a missing required
    /// field is `receipt_field_missing`.
    public init(payload: [UInt8]) throws(VerificationError) {
        guard payload.count <= Self.maximumPayloadSize else {
            throw VerificationError(.malformedReceipt, "receipt payload of \(payload.count) bytes is too large")
        }
        // Definite lengths only; long-form lengths that DER would write shorter are tolerated,
        // since the payload is signed by Apple and a BER encoder may produce them.
        var limits = ASN1Limits.der(errorCode: .malformedReceipt)
        limits.allowsNonMinimalLengths = true
        let set = try ASN1Reader.parseSingle(payload, limits: limits)
        guard set.identifier == .set else {
            throw VerificationError(.malformedReceipt, "receipt payload is \(set.identifier), expected a SET")
        }
        var values: [ReceiptField: [UInt8]] = [:]
        var reader = try set.childReader(limits: limits)
        while let entry = try reader.next() {
            guard entry.identifier == .sequence else {
                throw VerificationError(
                    .malformedReceipt, "receipt attribute is \(entry.identifier), expected a SEQUENCE")
            }
            var fields = try entry.childReader(limits: limits)
            let type = try fields.read(.integer, "receipt attribute type").integerValue(limits: limits)
            _ = try fields.read(.integer, "receipt attribute version").integerValue(limits: limits)
            let value = try fields.read(.octetString, "receipt attribute \(type) value").octetStringBytes(
                limits: limits)
            try fields.expectEnd("receipt attribute \(type)")
            guard let field = ReceiptField(rawValue: type) else { continue }
            guard values[field] == nil else {
                throw VerificationError(.malformedReceipt, "receipt field \(type) appears twice")
            }
            values[field] = value
        }
        for field in ReceiptField.required where values[field] == nil {
            throw VerificationError(.receiptFieldMissing, "receipt has no field \(field.rawValue) (\(field))")
        }

        func text(_ field: ReceiptField) throws(VerificationError) -> String {
            let bytes = values[field] ?? []
            guard let string = String(validating: bytes, as: UTF8.self) else {
                throw VerificationError(.malformedReceipt, "receipt field \(field.rawValue) (\(field)) is not UTF-8")
            }
            return string
        }
        func time(_ field: ReceiptField) throws(VerificationError) -> Date {
            guard let date = RFC3339.parse(values[field] ?? []) else {
                throw VerificationError(
                    .malformedReceipt, "receipt field \(field.rawValue) (\(field)) is not an RFC 3339 time")
            }
            return date
        }

        let typeText = try text(.type)
        guard let receiptType = ReceiptType(rawValue: typeText) else {
            throw VerificationError(.malformedReceipt, "unknown receipt type \"\(typeText.prefix(16))\"")
        }
        var riskMetric: Int?
        if let digits = values[.riskMetric] {
            guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                throw VerificationError(.malformedReceipt, "receipt risk metric is not a decimal number")
            }
            riskMetric = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        let appID = try text(.appID)
        guard !appID.isEmpty else { throw VerificationError(.malformedReceipt, "receipt App ID is empty") }
        self.init(
            appID: appID,
            attestedCertificate: values[.attestedCertificate] ?? [],
            clientHash: values[.clientHash] ?? [],
            token: try text(.token),
            type: receiptType,
            environment: try text(.environment),
            creationTime: try time(.creationTime),
            riskMetric: riskMetric,
            notBefore: values[.notBefore] == nil ? nil : try time(.notBefore),
            expirationTime: try time(.expirationTime)
        )
    }
}
