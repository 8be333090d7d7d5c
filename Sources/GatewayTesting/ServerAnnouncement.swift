package import Foundation

/// The first line a test server prints once it listens (`listening host:port` from
/// scripts/upstream.py and the fakes, `PORT n` from scripts/h2), read from its stdout.
package enum ServerAnnouncement {
    /// The bytes up to the first newline, or up to end of file: the read ends when the process
    /// dies, so a server that never announces cannot hang the test.
    package static func firstLine(of handle: FileHandle) -> String {
        var line = [UInt8]()
        while true {
            let byte = handle.readData(ofLength: 1)
            guard let value = byte.first, value != UInt8(ascii: "\n") else { break }
            line.append(value)
        }
        return String(decoding: line, as: UTF8.self)
    }

    /// The port of a `listening host:port` line; nil for any other line.
    package static func listeningPort(_ line: String) -> UInt16? {
        guard line.hasPrefix("listening "), let portText = line.split(separator: ":").last else { return nil }
        return UInt16(portText.trimmingCharacters(in: .whitespaces))
    }

    /// The port of a `PORT n` line; nil for any other line.
    package static func announcedPort(_ line: String) -> UInt16? {
        guard line.hasPrefix("PORT ") else { return nil }
        return UInt16(line.dropFirst(5))
    }
}
