/// One HTTP/2 header block as nghttp2 delivered it, field by field: every name and value in one
/// contiguous byte buffer, one span (offsets) per field. Bytes, not yet trusted:
/// `HTTP2RequestMapping` reads them and makes `String`s only for what the request value keeps.
///
/// A connection keeps one and reuses its storage for every stream's block (HTTP/2 never
/// interleaves two header blocks on a connection, RFC 9113 §4.3), so collecting a block costs
/// no allocation per field.
package struct HTTP2HeaderBlock: Sendable {
    /// Where one field's name and value lie in `bytes`.
    struct Span: Sendable {
        var nameStart: Int
        var nameCount: Int
        var valueStart: Int { self.nameStart + self.nameCount }
        var valueCount: Int
    }

    private(set) var bytes: [UInt8] = []
    private(set) var spans: [Span] = []
    /// The stream whose block this is (0: none).
    package var streamID: Int32 = 0
    /// The block's size as received (RFC 9113 §6.5.2's count: names, values, 32 per field),
    /// fields not kept included.
    package var receivedBytes = 0
    /// The block went past the mapping's limits: the rest was not kept (the mapping refuses it).
    package var overflowed = false

    package init() {}

    package init(_ fields: [HTTP2HeaderField]) {
        for field in fields {
            field.name.withUnsafeBytes { name in
                field.value.withUnsafeBytes { value in self.append(name: name, value: value) }
            }
        }
    }

    /// Fields in the block.
    package var count: Int { self.spans.count }

    package mutating func append(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let start = self.bytes.count
        // Typed buffers: appending an `UnsafeRawBufferPointer` (a generic `Sequence`) instantiated
        // its metadata on every call.
        self.bytes.append(contentsOf: name.assumingMemoryBound(to: UInt8.self))
        self.bytes.append(contentsOf: value.assumingMemoryBound(to: UInt8.self))
        self.spans.append(Span(nameStart: start, nameCount: name.count, valueCount: value.count))
    }

    /// Empties the block for the next stream, its storage kept.
    package mutating func reset(streamID: Int32) {
        self.bytes.removeAll(keepingCapacity: true)
        self.spans.removeAll(keepingCapacity: true)
        self.streamID = streamID
        self.receivedBytes = 0
        self.overflowed = false
    }

    /// Lets the storage go (a connection without streams holds none).
    package mutating func release() {
        self = HTTP2HeaderBlock()
    }

    /// Calls `body` with the block's bytes; a span's name and value are slices of them.
    func withBytes<R, E: Error>(_ body: (UnsafeBufferPointer<UInt8>) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = self.bytes.withUnsafeBufferPointer { buffer in
            do throws(E) {
                return .success(try body(buffer))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Some field is `content-type: application/grpc…` (a block that could not be mapped is
    /// still answered the gRPC way).
    package var looksLikeGRPC: Bool {
        self.withBytes { bytes in
            self.spans.contains { span in
                HTTP2HeaderBlock.slice(bytes, span.nameStart, span.nameCount).elementsEqual("content-type".utf8)
                    && HTTP2HeaderBlock.slice(bytes, span.valueStart, span.valueCount).starts(
                        with: "application/grpc".utf8)
            }
        }
    }

    static func slice(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ count: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: bytes[start..<start + count])
    }
}
