package import Foundation
import Glibc

/// What the tests' fake HTTPS servers share (Apple's `scripts/fake-apple.py`, Google's status
/// list and Play Integrity fakes): a throwaway test CA with a server certificate for `localhost`
/// and 127.0.0.1, and the start of a script that prints `listening host:port` as its first
/// line. Each fake keeps what is its own (keys, control endpoints, the script's arguments).
package enum FakeHTTPSServer {
    /// Writes into `directory`: `ca.key` and `ca.pem` (the CA a client trusts: its `ca_file`),
    /// `server.key` and `server.pem` (CN `localhost`, SAN `DNS:localhost`, `IP:127.0.0.1`,
    /// `serverAuth`), all P-256, valid two days; `caName` is the CA's CN.
    package static func makeCertificates(in directory: String, caName: String) throws {
        try openssl([
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", directory + "/ca.key",
        ])
        try openssl([
            "req", "-x509", "-new", "-key", directory + "/ca.key", "-subj", "/CN=\(caName)", "-days", "2",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
            "-out", directory + "/ca.pem",
        ])
        try openssl([
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", directory + "/server.key",
        ])
        try openssl([
            "req", "-new", "-key", directory + "/server.key", "-subj", "/CN=localhost", "-out",
            directory + "/server.csr",
        ])
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n".write(
            toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        try openssl([
            "x509", "-req", "-in", directory + "/server.csr", "-CA", directory + "/ca.pem", "-CAkey",
            directory + "/ca.key", "-CAcreateserial", "-days", "2", "-extfile", directory + "/server.ext", "-out",
            directory + "/server.pem",
        ])
    }

    /// Runs `openssl arguments` (from PATH) to its end; a non-zero exit throws with its stderr.
    package static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw FakeHTTPSServerError("openssl \(arguments.first ?? "") failed: \(text)")
        }
    }

    /// Starts `arguments` (through `/usr/bin/env`: `python3 <script> serve …`) and reads its
    /// first line, `listening host:port`: the running process and its port. A script that
    /// prints anything else (or dies) is killed and `name` is in the error.
    package static func launch(_ arguments: [String], name: String) throws -> (process: Process, port: UInt16) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = ServerAnnouncement.firstLine(of: output.fileHandleForReading)
        guard let port = ServerAnnouncement.listeningPort(text) else {
            Self.stop(process)
            throw FakeHTTPSServerError("\(name) did not start: \(text)")
        }
        return (process, port)
    }

    /// SIGKILL and wait: the child inherits the test process's blocked signals, SIGTERM included.
    package static func stop(_ process: Process) {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

package struct FakeHTTPSServerError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
