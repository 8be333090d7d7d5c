package import AppleClient
import Enforcement
import Foundation
package import GateContract
package import HTTP1
import OutboundHTTP

/// `POST /devicecheck/query` and `POST /devicecheck/update` on the admin listener: DeviceCheck's
/// two bits for upstream services. Never routed on a public listener: only
/// `AdminGate` calls this.
///
/// Request JSON `{"device_token": B64, "bit0"?: bool, "bit1"?: bool, "environment"?:
/// "production"|"development"}` (`bit0` and `bit1` both required for update). Answers are the
/// `devicecheck` CLI's JSON with 200; Apple's errors are the CLI's error JSON with 400 (Apple
/// refused the token or request), 502 (Apple refused our credentials or answered oddly), 503
/// (unreachable, throttled) or 504 (timeout). `Authorization: Bearer <token>` is required,
/// because `update` changes Apple-side state; the token is compared in constant time.
///
/// Apple's calls are async on `OutboundHTTPClient` (the event loops): the admin connection waits
/// for its completion and never blocks its loop. Immutable; any queue.
package struct DeviceCheckAdminAPI: Sendable {
    package static let paths = ["/devicecheck/query", "/devicecheck/update"]

    /// True for the API's paths.
    package static func handles(_ path: Substring) -> Bool {
        Self.paths.contains { $0 == path }
    }
    /// Largest request body read: a device token is a few KiB.
    package static let maximumBodyBytes = 32 * 1024

    let client: DeviceCheckClient
    let token: DeviceCheckAdminToken

    package init(client: DeviceCheckClient, token: DeviceCheckAdminToken) {
        self.client = client
        self.token = token
    }

    /// One typed refusal of the API: status, stable code, message.
    struct Refusal: Error {
        var status: Int
        var code: String
        var message: String
    }

    package func respond(
        to head: HTTPRequestHead, body: [UInt8]?, metrics: (@Sendable (String, String) -> Void)?,
        completion: @escaping @Sendable (LocalResponse) -> Void
    ) {
        let operation: DeviceCheckOperation = head.path == "/devicecheck/update" ? .update : .query
        let count: @Sendable (String) -> Void = { result in metrics?(operation.rawValue, result) }
        guard head.method == "POST" else {
            var response = LocalResponse.jsonError(status: 405, code: "method_not_allowed", message: "POST only")
            response.headers.add(name: "Allow", value: "POST")
            count("method_not_allowed")
            completion(response)
            return
        }
        guard self.token.admits(authorization: head.headers["Authorization"]) else {
            var response = LocalResponse.jsonError(
                status: 401, code: "unauthorized",
                message: "Authorization: Bearer <apple.device_check.admin_token_file> required")
            response.headers.add(name: "WWW-Authenticate", value: "Bearer")
            count("unauthorized")
            completion(response)
            return
        }
        let request: Request
        do {
            request = try Self.parse(body ?? [], operation: operation)
        } catch {
            count(error.code)
            completion(.jsonError(status: error.status, code: error.code, message: error.message))
            return
        }
        let client = self.client
        Task {
            let result = await client.call(
                operation, deviceToken: request.deviceToken, bits: request.bits, environment: request.environment)
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/json")
            headers.add(name: "Cache-Control", value: "no-store")
            switch result {
            case .success(let answer):
                count("ok")
                let text = DeviceCheckClient.json(answer, operation: operation)
                completion(LocalResponse(status: 200, headers: headers, body: Array(text.utf8)))
            case .failure(let error):
                count(error.code.description)
                let text = DeviceCheckClient.json(error)
                completion(LocalResponse(status: Self.status(of: error), headers: headers, body: Array(text.utf8)))
            }
        }
    }

    /// The HTTP status an Apple error is answered with.
    static func status(of error: AppleError) -> Int {
        switch error.code {
        case .badRequest, .invalidRequest: return 400
        case .timedOut: return 504
        case .unreachable, .throttled, .serverError, .tlsFailed: return 503
        default: return 502
        }
    }

    struct Request {
        var deviceToken: String
        var bits: (bit0: Bool, bit1: Bool)?
        var environment: AppleEnvironment?
    }

    static func parse(_ body: [UInt8], operation: DeviceCheckOperation) throws(Refusal) -> Request {
        func malformed(_ message: String) -> Refusal {
            Refusal(status: 400, code: "malformed_request", message: message)
        }
        guard body.count <= Self.maximumBodyBytes else {
            throw Refusal(status: 413, code: "body_too_large", message: "body exceeds \(Self.maximumBodyBytes) bytes")
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw malformed("body is not a JSON object")
        }
        let known: Set<String> = ["device_token", "bit0", "bit1", "environment"]
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw malformed("unknown field \(unknown)")
        }
        guard let token = object["device_token"] as? String, !token.isEmpty,
            EndpointRequests.decodeBase64(token) != nil
        else { throw malformed("field device_token (a base64 string) is missing or not base64") }
        var environment: AppleEnvironment?
        if let value = object["environment"] {
            guard let text = value as? String, let parsed = AppleEnvironment(rawValue: text) else {
                throw malformed("environment must be production or development")
            }
            environment = parsed
        }
        var bits: (bit0: Bool, bit1: Bool)?
        let bit0 = try Self.bool(object["bit0"], "bit0")
        let bit1 = try Self.bool(object["bit1"], "bit1")
        switch operation {
        case .update:
            guard let bit0, let bit1 else { throw malformed("update needs both bit0 and bit1 (true or false)") }
            bits = (bit0, bit1)
        case .query, .validate:
            guard bit0 == nil, bit1 == nil else { throw malformed("bit0 and bit1 belong to update only") }
        }
        return Request(deviceToken: token, bits: bits, environment: environment)
    }

    /// A JSON boolean (Foundation on Linux hands booleans over as NSNumber); nil when absent.
    private static func bool(_ value: Any?, _ name: String) throws(Refusal) -> Bool? {
        guard let value else { return nil }
        if let flag = value as? Bool { return flag }
        if let number = value as? NSNumber, number == 0 || number == 1 { return number.boolValue }
        throw Refusal(status: 400, code: "malformed_request", message: "\(name) must be true or false")
    }
}
