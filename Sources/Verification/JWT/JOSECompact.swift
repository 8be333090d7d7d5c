import Foundation

/// What reading JOSE's compact serializations shares (RFC 7515 §7.1 JWS, RFC 7516 §7.1 JWE):
/// bounded text split at '.' into an exact number of parts, each part strict unpadded base64url
/// (`Base64URL`), and a protected header that is a JSON object. Each reader (`CompactJWS`,
/// `PlayIntegrityJWS`, `PlayIntegrityJWE`) turns a failure into its own domain's error, in its
/// own words.
enum JOSECompact {
    enum SplitFailure: Error, Equatable {
        /// Longer than the reader's bound.
        case tooLong
        /// Not exactly the reader's number of '.'-separated parts: the count found.
        case partCount(Int)
    }

    enum ObjectFailure: Error, Equatable {
        /// The bytes do not start with `{`.
        case notAnObject
        /// The header's decoder refused a `crit` member (`JOSEHeader` does, RFC 7515 §4.1.11).
        case criticalExtensions
        /// Not JSON, or not the members the reader expects with their types.
        case notTheExpectedObject
    }

    /// The parts of `bytes` split at '.', when it is at most `maximumBytes` long and has exactly
    /// `count` parts (empty parts included).
    static func split(_ bytes: [UInt8], count: Int, maximumBytes: Int) throws(SplitFailure) -> [ArraySlice<UInt8>] {
        guard bytes.count <= maximumBytes else { throw .tooLong }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == count else { throw .partCount(parts.count) }
        return parts
    }

    /// A part's bytes, or nil when it is empty or not unpadded base64url.
    static func nonEmptyPart(_ part: ArraySlice<UInt8>) -> [UInt8]? {
        guard !part.isEmpty else { return nil }
        return Base64URL.decode(part)
    }

    /// `T` from the bytes of a JSON object (a header, or a JWS's payload). Duplicate member names
    /// resolve to the last (RFC 7515 §5.2 allows it).
    static func object<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws(ObjectFailure) -> T {
        guard bytes.first == UInt8(ascii: "{") else { throw .notAnObject }
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch let error as DecodingError {
            if case .dataCorrupted(let context) = error, context.codingPath.last?.stringValue == "crit" {
                throw .criticalExtensions
            }
            throw .notTheExpectedObject
        } catch {
            throw .notTheExpectedObject
        }
    }
}
