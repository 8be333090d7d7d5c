// The repository's files (docs, scripts) for the tests that read them.
package import Foundation

package enum Repository {
    /// The repository's root directory (this file is Sources/GatewayTesting/Repository.swift).
    package static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // GatewayTesting
        .deletingLastPathComponent()  // Sources
        .deletingLastPathComponent()

    /// The text of the file at `relativePath` from the root.
    package static func read(_ relativePath: String) throws -> String {
        try String(contentsOf: Self.root.appendingPathComponent(relativePath), encoding: .utf8)
    }
}
