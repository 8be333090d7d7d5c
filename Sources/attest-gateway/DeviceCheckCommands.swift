import AppleClient
import Dispatch
import Foundation
import GatewayIO
import OutboundHTTP
import PolicyModel

/// `attest-gateway devicecheck query|update|validate`: one DeviceCheck call with the
/// credentials of the policy's `apple:` block, Apple's answer printed as JSON.
enum DeviceCheckCommandSupport {
    static let options: Set<String> = ["config", "token", "bit0", "bit1", "environment"]

    static func usage(_ operation: String, extra: String = "") -> String {
        """
        usage: attest-gateway devicecheck \(operation) --config FILE --token B64\(extra) [--environment production|development]
          Calls Apple's DeviceCheck \(operation) with the credentials of the policy FILE's apple: block
          (team_id, key_id, private_key_file; devicecheck_url and ca_file when set) and prints the
          answer as one JSON object. --token is the base64 device token from
          DCDevice.current.generateToken(). --environment defaults to apple.environment.
          Prints {"bit0":B,"bit1":B,"last_update_time":"YYYY-MM"} (query), {"bits_set":false}
          (query: Apple's "Failed to find bit state"), {"updated":true} (update), {"valid":true}
          (validate). Exit 0 on an answer; on an error prints {"error":CODE,"status":N,"reason":TEXT}
          and exits 1 (apple_bad_request, apple_unauthorized, apple_throttled, apple_server_error,
          apple_timeout, apple_tls_failed, apple_unreachable, ...). Usage errors exit 2.
        """
    }

    static func run(_ operation: DeviceCheckOperation, _ words: [String], usage: String) throws -> Int32 {
        let arguments = try CommandLineArguments(words, valued: Self.options)
        if arguments.wantsHelp {
            print(usage)
            return 0
        }
        guard arguments.positionals.isEmpty else { throw UsageError("unexpected \(arguments.positionals[0])") }
        let token = try arguments.required("token")
        var bits: (Bool, Bool)?
        if operation == .update {
            bits = (try Self.bit(arguments, "bit0"), try Self.bit(arguments, "bit1"))
        } else if try arguments.value("bit0") != nil || arguments.value("bit1") != nil {
            throw UsageError("--bit0 and --bit1 are for update only")
        }
        var environment: AppleEnvironment?
        if let text = try arguments.value("environment") {
            guard let value = AppleEnvironment(rawValue: text) else {
                throw UsageError("--environment is production or development, not \(text)")
            }
            environment = value
        }
        let configuration = try Self.configuration(arguments)
        let chosenBits = bits.map { (bit0: $0.0, bit1: $0.1) }
        let chosenEnvironment = environment
        let answer = Self.withClient(configuration) { client in
            await DeviceCheckClient(client: client, configuration: configuration).call(
                operation, deviceToken: token, bits: chosenBits, environment: chosenEnvironment)
        }
        switch answer {
        case .success(let answer):
            print(DeviceCheckClient.json(answer, operation: operation))
            return 0
        case .failure(let error):
            print(DeviceCheckClient.json(error))
            return 1
        }
    }

    static func bit(_ arguments: CommandLineArguments, _ name: String) throws(UsageError) -> Bool {
        switch try arguments.required(name) {
        case "0", "false": return false
        case "1", "true": return true
        case let other: throw UsageError("--\(name) is 0 or 1, not \(other)")
        }
    }

    /// The policy's `apple:` block (exit 1 with the policy error when it does not load).
    static func configuration(_ arguments: CommandLineArguments) throws -> AppleConfiguration {
        let path = try arguments.required("config")
        let policy = try PolicyLoader.load(path: path)
        guard let apple = policy.apple else {
            throw CommandFailure("\(path) has no apple: block (team_id, key_id, private_key_file)")
        }
        return apple
    }

    /// Runs `body` with a client on one private event loop, waits for it, then closes both.
    static func withClient<T: Sendable>(
        _ configuration: AppleConfiguration,
        _ body: @escaping @Sendable (OutboundHTTPClient) async -> Result<T, AppleError>
    ) -> Result<T, AppleError> {
        let loop: EventLoop
        let client: OutboundHTTPClient
        do {
            loop = try EventLoop(index: 0)
            client = try AppleClientFactory.make(
                configuration, loops: [loop], metrics: OutboundClientMetrics(registry: MetricsRegistry(), peer: .apple))
        } catch let error as AppleError {
            return .failure(error)
        } catch {
            return .failure(AppleError(.unreachable, "no event loop: \(error)"))
        }
        let box = ResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        Task {
            box.value = await body(client)
            client.shutdown {
                loop.execute {
                    loop.close()
                    done.signal()
                }
            }
        }
        done.wait()
        return box.value!
    }
}

/// Carries a result out of the task to the waiting main thread (the semaphore orders access).
final class ResultBox<T: Sendable>: @unchecked Sendable {
    var value: Result<T, AppleError>?
}

/// A failure that is not a usage error: printed, exit 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum DeviceCheckQueryCommand: Subcommand {
    static let name = "devicecheck query"
    static let summary = "ask Apple for a device's two DeviceCheck bits (JSON)"
    static let usage = DeviceCheckCommandSupport.usage("query")
    static func run(_ words: [String]) throws -> Int32 {
        try DeviceCheckCommandSupport.run(.query, words, usage: Self.usage)
    }
}

enum DeviceCheckUpdateCommand: Subcommand {
    static let name = "devicecheck update"
    static let summary = "set a device's two DeviceCheck bits at Apple"
    static let usage = DeviceCheckCommandSupport.usage("update", extra: " --bit0 0|1 --bit1 0|1")
    static func run(_ words: [String]) throws -> Int32 {
        try DeviceCheckCommandSupport.run(.update, words, usage: Self.usage)
    }
}

enum DeviceCheckValidateCommand: Subcommand {
    static let name = "devicecheck validate"
    static let summary = "ask Apple whether a DeviceCheck token is valid"
    static let usage = DeviceCheckCommandSupport.usage("validate")
    static func run(_ words: [String]) throws -> Int32 {
        try DeviceCheckCommandSupport.run(.validate, words, usage: Self.usage)
    }
}

/// `attest-gateway apple check`: are the credentials good? A `validate_device_token` call
/// with a token Apple cannot accept: 400 means Apple took the JWT (and refused the token, as
/// expected), 401 means it refused the JWT.
enum AppleCheckCommand: Subcommand {
    static let name = "apple check"
    static let summary = "try the apple: credentials against Apple's DeviceCheck server"
    static let usage = """
        usage: attest-gateway apple check --config FILE [--environment production|development]
          Signs a JWT with the policy FILE's apple: credentials and sends Apple's DeviceCheck
          validate_device_token a probe token that cannot be valid. Apple answers 400 when it
          accepted the JWT (the probe token is refused, as expected) and 401 when it refused the
          JWT (wrong team_id, key_id or key). Prints {"credentials":"accepted"|"refused",
          "status":N,"host":H} or {"error":CODE,...}. Exit 0 when accepted, 1 otherwise.
        """
    /// base64 of "attest-gateway credentials probe": not a DeviceCheck token.
    static let probeToken = "YXR0ZXN0LWdhdGV3YXkgY3JlZGVudGlhbHMgcHJvYmU="

    static func run(_ words: [String]) throws -> Int32 {
        let arguments = try CommandLineArguments(words, valued: ["config", "environment"])
        if arguments.wantsHelp {
            print(Self.usage)
            return 0
        }
        var configuration = try DeviceCheckCommandSupport.configuration(arguments)
        if let text = try arguments.value("environment") {
            guard let value = AppleEnvironment(rawValue: text) else {
                throw UsageError("--environment is production or development, not \(text)")
            }
            configuration.environment = value
        }
        let request = try DeviceCheckRequest.validate(
            deviceToken: Self.probeToken, timestamp: Date(), environment: configuration.environment,
            override: configuration.deviceCheckOverride)
        let timeout = configuration.deviceCheck.timeout
        let result = DeviceCheckCommandSupport.withClient(configuration) { client in
            await client.send(request, timeout: timeout).mapError { AppleError($0) }
        }
        let host = jsonQuote(request.endpoint.hostHeader)
        switch result {
        case .success(let response) where response.status == 400 || response.status == 200:
            print(#"{"credentials":"accepted","status":\#(response.status),"host":\#(host)}"#)
            return 0
        case .success(let response) where response.status == 401:
            print(#"{"credentials":"refused","status":401,"host":\#(host)}"#)
            return 1
        case .success(let response):
            print(
                DeviceCheckClient.json(AppleError.answer(status: response.status, body: response.body, call: "check")))
            return 1
        case .failure(let error):
            print(DeviceCheckClient.json(error))
            return 1
        }
    }
}
