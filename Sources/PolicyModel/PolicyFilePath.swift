import Foundation

/// Reads a file path from the policy: relative paths resolve against the policy file's
/// directory, and the file must exist and be readable now, so the error names the file, line
/// and field that pointed at it rather than surfacing at the first handshake.
struct PolicyFilePath {
    let reader: PolicyScalarReader
    /// The policy file's directory.
    let baseDirectory: String

    /// `path` made absolute against the policy file's directory.
    func resolve(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : (self.baseDirectory as NSString).appendingPathComponent(path)
        return (absolute as NSString).standardizingPath
    }

    /// The resolved path of a readable regular file; `what` names it in messages ("certificate").
    /// `size` may refuse the file by its byte count (nil = any size).
    func readableFile(
        _ node: YAMLNode,
        what: String,
        size: (Int) -> String? = { _ in nil }
    ) throws(PolicyError) -> String {
        let text = try self.reader.string(node, expected: "a file path")
        guard !text.isEmpty else {
            throw self.reader.error(.tlsFileUnreadable, node, "expected a file path for the \(what); found \"\"")
        }
        let resolved = self.resolve(text)
        let origin =
            text.hasPrefix("/") ? "" : " (\(PolicyScalarReader.quote(text)) relative to the policy file's directory)"
        switch ReadableFile.check(path: resolved) {
        case .success(let bytes):
            if let problem = size(bytes) {
                throw self.reader.error(.tlsFileUnreadable, node, "\(what) \(resolved)\(origin): \(problem)")
            }
            return resolved
        case .failure(let problem):
            throw self.reader.error(.tlsFileUnreadable, node, "\(what) \(resolved)\(origin): \(problem)")
        }
    }
}
