import Dispatch
import Foundation
import Simulator
import Synchronization
import Verification

// Pre-mints App Attest material for the enforced-route benchmark (scripts/bench-enforced.sh),
// and Android material for scripts/bench-android.sh, with the simulator (development only; build
// with -c release).
//
//   bench-mint attest --dir DIR --app-id ID [--environment development|production]
//       stdin: one gateway challenge per line. For each, creates a simulated device key in DIR
//       and prints one JSON line {"key_id","attestation","challenge"} (the body of
//       POST /app-attest/attest).
//   bench-mint assert --dir DIR --app-id ID --keys FILE --method M --target T --rounds R
//                     [--first-counter C] [--out FILE]
//       FILE: one key ID (standard base64) per line, K keys, all in DIR. Prints R x K lines
//       "<key ID> <assertion>" (both standard base64): line r*K + k is key k's assertion with
//       counter C + r over the `binding: request` clientData of an empty-body request
//       (docs/protocol.md: "appattest-v1\nM\nT\n<hex SHA256 of no bytes>\n", no challenge).
//       Consecutive uses of one key are K lines apart, so up to about K requests can be in
//       flight without two of one key overtaking each other.
//   bench-mint android-enroll --dir DIR --keys-out FILE
//       stdin: one gateway challenge per line. For each, a simulated Android Keystore key and its
//       chain under DIR's Android test root (made on first use: DIR/android_root.pem, the file to
//       list under android.trust_anchors) with the challenge as attestation challenge; prints one
//       JSON line, the body of POST /app-attest/attest with "platform": "android" (docs/protocol.md
//       section 8), and appends "<key ID> <base64 of the key's PKCS#8 PEM>" to FILE.
//   bench-mint android-assert --keys FILE --method M --target T --rounds R [--first-counter C]
//                             [--out FILE]
//       FILE: the --keys-out lines of android-enroll (K keys). As `assert`, R x K lines "<key ID>
//       <X-App-Assertion>" in the same order, each the Android wire format: base64 of counter
//       (8 bytes, big-endian) || DER ECDSA signature over "attest-gateway-android-v1" || counter ||
//       SHA256(clientData), clientData the `binding: request` one of an empty-body request.

struct MintError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `--name value` pairs after the mode word; every name must be known.
struct Options {
    private var values: [String: String] = [:]

    init(_ words: ArraySlice<String>, known: Set<String>) throws {
        var index = words.startIndex
        while index < words.endIndex {
            let word = words[index]
            guard word.hasPrefix("--"), known.contains(String(word.dropFirst(2))) else {
                throw MintError("unknown argument \(word)")
            }
            guard index + 1 < words.endIndex else { throw MintError("\(word) needs a value") }
            self.values[String(word.dropFirst(2))] = words[index + 1]
            index += 2
        }
    }

    func optional(_ name: String) -> String? { self.values[name] }

    func required(_ name: String) throws -> String {
        guard let value = self.values[name] else { throw MintError("missing --\(name)") }
        return value
    }

    func positiveInt(_ name: String, default fallback: Int? = nil) throws -> Int {
        guard let text = self.values[name] else {
            if let fallback { return fallback }
            throw MintError("missing --\(name)")
        }
        guard let value = Int(text), value > 0 else { throw MintError("--\(name) must be a positive integer") }
        return value
    }
}

func absolutePath(_ path: String) -> String {
    path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
}

func jsonString(_ text: String) -> String {
    // Only ever given base64 and base64url text (challenges are checked on input): no escaping.
    "\"" + text + "\""
}

func runAttest(_ options: Options) throws {
    let directory = SimulatorDirectory(path: absolutePath(try options.required("dir")))
    let appID = try options.required("app-id")
    let environmentText = options.optional("environment") ?? "development"
    guard let environment = AppAttestEnvironment(rawValue: environmentText) else {
        throw MintError("--environment must be development or production")
    }
    let authority = try directory.authority()
    let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    var count = 0
    while let line = readLine() {
        let challenge = line.trimmingCharacters(in: .whitespaces)
        if challenge.isEmpty { continue }
        guard challenge.allSatisfy({ allowed.contains($0) }) else {
            throw MintError("challenge \(count + 1) is not base64url text")
        }
        let device = try directory.createDevice()
        let attestation = try authority.attestation(
            for: device, appID: appID, clientDataHash: SHA256.hash(Array(challenge.utf8)), environment: environment)
        print(
            "{\"key_id\":\(jsonString(Data(device.keyID).base64EncodedString())),"
                + "\"attestation\":\(jsonString(Data(attestation).base64EncodedString())),"
                + "\"challenge\":\(jsonString(challenge))}")
        count += 1
    }
    guard count > 0 else { throw MintError("no challenges on stdin") }
}

func runAssert(_ options: Options) throws {
    let directory = SimulatorDirectory(path: absolutePath(try options.required("dir")))
    let appID = try options.required("app-id")
    let method = try options.required("method")
    let target = try options.required("target")
    let rounds = try options.positiveInt("rounds")
    let firstCounter = try options.positiveInt("first-counter", default: 1)
    guard firstCounter + rounds - 1 <= Int(UInt32.max) else { throw MintError("counters would exceed UInt32") }
    let keysText = try String(contentsOfFile: try options.required("keys"), encoding: .utf8)
    let keyIDs = keysText.split(whereSeparator: \.isNewline).map(String.init).filter { !$0.isEmpty }
    guard !keyIDs.isEmpty else { throw MintError("--keys file lists no key IDs") }
    let devices = try keyIDs.map { text -> SimulatedDevice in
        guard let bytes = Data(base64Encoded: text) else { throw MintError("key ID \(text) is not base64") }
        return try directory.device(keyID: [UInt8](bytes))
    }

    let emptyBodyDigest = SHA256.hash([]).map { String(format: "%02x", $0) }.joined()
    let clientData = "appattest-v1\n\(method)\n\(target)\n\(emptyBodyDigest)\n"
    let clientDataHash = SHA256.hash(Array(clientData.utf8))

    // Rounds are split into chunks signed in parallel, then written in order.
    let chunkCount = min(rounds, 64)
    let chunks = Mutex<[Int: Result<[UInt8], any Error>]>([:])
    DispatchQueue.concurrentPerform(iterations: chunkCount) { chunk in
        let lower = rounds * chunk / chunkCount
        let upper = rounds * (chunk + 1) / chunkCount
        let result = Result<[UInt8], any Error> {
            var bytes: [UInt8] = []
            bytes.reserveCapacity((upper - lower) * devices.count * 240)
            for round in lower..<upper {
                let counter = UInt32(firstCounter + round)
                for (index, device) in devices.enumerated() {
                    let assertion = try device.assertion(clientDataHash: clientDataHash, appID: appID, counter: counter)
                    bytes += keyIDs[index].utf8
                    bytes.append(UInt8(ascii: " "))
                    bytes += Data(assertion).base64EncodedString().utf8
                    bytes.append(UInt8(ascii: "\n"))
                }
            }
            return bytes
        }
        chunks.withLock { $0[chunk] = result }
    }

    try writeChunks(chunks.withLock { $0 }, count: chunkCount, to: options.optional("out"))
}

func runAndroidEnroll(_ options: Options) throws {
    let directory = absolutePath(try options.required("dir"))
    let keysOut = try options.required("keys-out")
    let authority: SimulatedAndroidAuthority
    let rootPath = (directory as NSString).appendingPathComponent(SimulatedAndroidAuthority.FileName.rootCertificate)
    if FileManager.default.fileExists(atPath: rootPath) {
        authority = try SimulatedAndroidAuthority.load(directory: directory)
    } else {
        authority = try SimulatedAndroidAuthority.generate()
        try authority.save(directory: directory)
    }
    let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    var keyLines: [UInt8] = []
    var count = 0
    while let line = readLine() {
        let challenge = line.trimmingCharacters(in: .whitespaces)
        if challenge.isEmpty { continue }
        guard challenge.allSatisfy({ allowed.contains($0) }) else {
            throw MintError("challenge \(count + 1) is not base64url text")
        }
        let key = try authority.generateKey(challenge: Array(challenge.utf8))
        let chain = key.chain.map { jsonString(Data($0).base64EncodedString()) }.joined(separator: ",")
        print(
            "{\"platform\":\"android\",\"challenge\":\(jsonString(challenge)),\"certificate_chain\":[\(chain)]}")
        keyLines += key.keyID.utf8
        keyLines.append(UInt8(ascii: " "))
        keyLines += Data(key.privateKeyPEM.utf8).base64EncodedString().utf8
        keyLines.append(UInt8(ascii: "\n"))
        count += 1
    }
    guard count > 0 else { throw MintError("no challenges on stdin") }
    guard FileManager.default.createFile(atPath: keysOut, contents: Data(keyLines)) else {
        throw MintError("cannot write \(keysOut)")
    }
}

func runAndroidAssert(_ options: Options) throws {
    let method = try options.required("method")
    let target = try options.required("target")
    let rounds = try options.positiveInt("rounds")
    let firstCounter = try options.positiveInt("first-counter", default: 1)
    guard firstCounter + rounds - 1 <= Int(UInt32.max) else { throw MintError("counters would exceed UInt32") }
    let keysText = try String(contentsOfFile: try options.required("keys"), encoding: .utf8)
    var parsedIDs: [String] = []
    var parsedKeys: [SimulatedAndroidKey] = []
    for line in keysText.split(whereSeparator: \.isNewline) where !line.isEmpty {
        let fields = line.split(separator: " ")
        guard fields.count == 2, let pem = Data(base64Encoded: String(fields[1])) else {
            throw MintError("--keys: expected \"<key ID> <base64 PEM>\" lines (android-enroll --keys-out)")
        }
        let key = try SimulatedAndroidKey(privateKeyPEM: String(decoding: pem, as: UTF8.self), chain: [])
        guard key.keyID == String(fields[0]) else { throw MintError("--keys: key \(fields[0]) does not match its PEM") }
        parsedIDs.append(key.keyID)
        parsedKeys.append(key)
    }
    let keyIDs = parsedIDs
    let keys = parsedKeys
    guard !keys.isEmpty else { throw MintError("--keys file lists no keys") }

    let emptyBodyDigest = SHA256.hash([]).map { String(format: "%02x", $0) }.joined()
    let clientDataHash = SHA256.hash(Array("appattest-v1\n\(method)\n\(target)\n\(emptyBodyDigest)\n".utf8))

    let chunkCount = min(rounds, 64)
    let chunks = Mutex<[Int: Result<[UInt8], any Error>]>([:])
    DispatchQueue.concurrentPerform(iterations: chunkCount) { chunk in
        let lower = rounds * chunk / chunkCount
        let upper = rounds * (chunk + 1) / chunkCount
        let result = Result<[UInt8], any Error> {
            var bytes: [UInt8] = []
            bytes.reserveCapacity((upper - lower) * keys.count * 160)
            for round in lower..<upper {
                let counter = UInt64(firstCounter + round)
                for (index, key) in keys.enumerated() {
                    let assertion = try key.assertion(clientDataHash: clientDataHash, counter: counter)
                    bytes += keyIDs[index].utf8
                    bytes.append(UInt8(ascii: " "))
                    bytes += Data(assertion).base64EncodedString().utf8
                    bytes.append(UInt8(ascii: "\n"))
                }
            }
            return bytes
        }
        chunks.withLock { $0[chunk] = result }
    }
    try writeChunks(chunks.withLock { $0 }, count: chunkCount, to: options.optional("out"))
}

/// Writes the chunks in order to `path` (stdout when nil).
func writeChunks(_ results: [Int: Result<[UInt8], any Error>], count: Int, to path: String?) throws {
    let output: FileHandle
    if let path {
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw MintError("cannot create \(path)")
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { throw MintError("cannot open \(path)") }
        output = handle
    } else {
        output = FileHandle.standardOutput
    }
    for chunk in 0..<count {
        guard let result = results[chunk] else { throw MintError("chunk \(chunk) missing") }
        try output.write(contentsOf: Data(try result.get()))
    }
    try output.close()
}

let usage = """
    usage: bench-mint attest --dir DIR --app-id ID [--environment development|production]  (challenges on stdin)
           bench-mint assert --dir DIR --app-id ID --keys FILE --method M --target T --rounds R [--first-counter C] [--out FILE]
           bench-mint android-enroll --dir DIR --keys-out FILE  (challenges on stdin)
           bench-mint android-assert --keys FILE --method M --target T --rounds R [--first-counter C] [--out FILE]
    """

let arguments = CommandLine.arguments.dropFirst()
do {
    switch arguments.first {
    case "attest":
        try runAttest(try Options(arguments.dropFirst(), known: ["dir", "app-id", "environment"]))
    case "assert":
        try runAssert(
            try Options(
                arguments.dropFirst(),
                known: ["dir", "app-id", "keys", "method", "target", "rounds", "first-counter", "out"]))
    case "android-enroll":
        try runAndroidEnroll(try Options(arguments.dropFirst(), known: ["dir", "keys-out"]))
    case "android-assert":
        try runAndroidAssert(
            try Options(
                arguments.dropFirst(), known: ["keys", "method", "target", "rounds", "first-counter", "out"]))
    case "--help", "-h":
        print(usage)
    default:
        FileHandle.standardError.write(Data((usage + "\n").utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("bench-mint: \(error)\n".utf8))
    exit(1)
}
