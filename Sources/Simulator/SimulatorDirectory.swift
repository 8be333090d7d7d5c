import Foundation
import Verification

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The on-disk state of `attest-gateway sim`: the authority (root_ca.pem and friends) and one
/// key file plus one counter file per simulated device under `keys/`.
///
/// Safe for concurrent processes: the authority is created once under an exclusive `flock`;
/// device keys are written to a temporary file and renamed into place; each key's counter is
/// read-modified-written under that key's own lock, so `sim assert` on different keys never
/// contend and on the same key never lose an update.
public struct SimulatorDirectory: Sendable {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    public var rootCertificatePath: String { self.file(SimulatorAuthority.FileName.rootCertificate) }
    private var keysPath: String { self.file("keys") }

    private func file(_ name: String) -> String { (self.path as NSString).appendingPathComponent(name) }

    /// Loads the authority saved in the directory, or generates and saves one if there is none.
    @discardableResult
    public func authority() throws -> SimulatorAuthority {
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
        return try SimulatorFiles.withLock(self.file(".init.lock")) {
            if FileManager.default.fileExists(atPath: self.rootCertificatePath) {
                return try SimulatorAuthority.load(directory: self.path)
            }
            let authority = try SimulatorAuthority.generate()
            try authority.save(directory: self.path)
            return authority
        }
    }

    /// A new device whose key is saved as `keys/<hex key ID>.pem`.
    public func createDevice() throws -> SimulatedDevice {
        try FileManager.default.createDirectory(atPath: self.keysPath, withIntermediateDirectories: true)
        let device = try SimulatedDevice.generate()
        try SimulatorFiles.writeAtomically(
            Array(device.privateKeyPEM.utf8), to: self.keyFile(device.keyID), mode: 0o600)
        return device
    }

    /// The device saved under `keyID`.
    public func device(keyID: [UInt8]) throws -> SimulatedDevice {
        let path = self.keyFile(keyID)
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw SimulatorError("no simulated key \(Data(keyID).base64EncodedString()) in \(self.path) (\(path))")
        }
        let device = try SimulatedDevice(privateKeyPEM: pem)
        guard device.keyID == keyID else { throw SimulatorError("key file \(path) holds another key") }
        return device
    }

    /// The counter to use for the next assertion of `keyID`: `requested`, or the last one + 1.
    /// The stored value becomes max(last, counter), so later default counters stay fresh.
    public func nextCounter(keyID: [UInt8], requested: UInt32?) throws -> UInt32 {
        let counterPath = self.keyFile(keyID, extension: "counter")
        return try SimulatorFiles.withLock(self.keyFile(keyID, extension: "lock")) {
            var last: UInt32 = 0
            if let text = try? String(contentsOfFile: counterPath, encoding: .utf8) {
                guard let value = UInt32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                    throw SimulatorError("counter file \(counterPath) is corrupt")
                }
                last = value
            }
            let counter: UInt32
            if let requested {
                counter = requested
            } else {
                guard last < UInt32.max else { throw SimulatorError("counter of this key is exhausted") }
                counter = last + 1
            }
            try SimulatorFiles.writeAtomically(Array("\(max(last, counter))\n".utf8), to: counterPath, mode: 0o644)
            return counter
        }
    }

    private func keyFile(_ keyID: [UInt8], extension ext: String = "pem") -> String {
        (self.keysPath as NSString).appendingPathComponent("\(keyID.hexString).\(ext)")
    }
}

/// File helpers for the simulator's state.
enum SimulatorFiles {
    /// Writes `bytes` to a unique temporary file beside `path`, then renames it over `path`.
    static func writeAtomically(_ bytes: [UInt8], to path: String, mode: mode_t) throws {
        let temporary = "\(path).tmp.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw SimulatorError("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let message = String(cString: strerror(errno))
                close(fd)
                unlink(temporary)
                throw SimulatorError("cannot write \(temporary): \(message)")
            }
            written += n
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let message = String(cString: strerror(errno))
            unlink(temporary)
            throw SimulatorError("cannot rename \(temporary) to \(path): \(message)")
        }
    }

    /// Runs `body` holding an exclusive `flock` on `lockPath` (created if needed).
    static func withLock<T>(_ lockPath: String, _ body: () throws -> T) throws -> T {
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SimulatorError("cannot open \(lockPath): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw SimulatorError("cannot lock \(lockPath): \(String(cString: strerror(errno)))")
            }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }
}
