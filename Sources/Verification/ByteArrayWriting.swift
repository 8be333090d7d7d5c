extension Array where Element == UInt8 {
    /// `count` bytes, written in place by `body` (zeros where it writes none).
    ///
    /// What `init(unsafeUninitializedCapacity:initializingWith:)` does, but specialised: that
    /// initializer reaches the standard library's unspecialised buffer allocation, which looks
    /// up the storage's generic metadata at run time on every call (~530 instructions, eight
    /// calls per verified request; callgrind, BENCHMARKS.md).
    @inlinable
    public init(count: Int, writing body: (UnsafeMutableBufferPointer<UInt8>) throws -> Void) rethrows {
        // Written on the stack (the heap past 1 KiB), then copied in: `Array(buffer)` reaches
        // the specialised allocation and a memcpy. Filling a reserved array instead cost ~10
        // instructions per byte (`append(contentsOf: repeatElement(0, count:))`).
        self = try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { buffer in
            // Zeroed first (a memset), so that a writer that stops early, as the base64 decoder
            // does on an invalid character, never has uninitialised bytes read.
            buffer.initialize(repeating: 0)
            try body(buffer)
            return Array(buffer)
        }
    }
}
