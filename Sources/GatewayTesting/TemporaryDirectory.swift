// Scratch directories for the tests (policy files, key files, sockets' paths).
import Foundation

/// A scratch directory removed when the test ends.
package final class TemporaryDirectory {
    package let path: String

    package init() throws {
        let base = FileManager.default.temporaryDirectory.path
        self.path = base + "/policy-tests-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}
