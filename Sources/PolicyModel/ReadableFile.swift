import Foundation

/// Checks that a path named in the policy is a regular file this process can read, so a typo
/// or a missing Secret mount fails at load with the field that named it, not at the first
/// handshake. The contents are not looked at (the TLS layer parses PEM itself).
enum ReadableFile {
    enum Problem: Error, Equatable, CustomStringConvertible {
        case missing
        case directory
        case unreadable
        /// A size the caller requires (session ticket keys).
        case wrongSize(String)

        var description: String {
            switch self {
            case .missing: "not found"
            case .directory: "is a directory"
            case .unreadable: "cannot be read (permissions?)"
            case .wrongSize(let why): why
            }
        }
    }

    /// The file's size in bytes.
    static func check(path: String) -> Result<Int, Problem> {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return .failure(.missing) }
        guard !isDirectory.boolValue else { return .failure(.directory) }
        guard FileManager.default.isReadableFile(atPath: path),
            let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let size = attributes[.size] as? NSNumber
        else { return .failure(.unreadable) }
        return .success(size.intValue)
    }
}
