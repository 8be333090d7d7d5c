package import Foundation
package import OutboundHTTP

/// DeviceCheck's three calls over `OutboundHTTPClient`: builds the request for the configured
/// environment (or the one given) and host override, sends it with the DeviceCheck timeout,
/// and decodes Apple's answer, sending again after a 429, a 5xx or no answer while the timeout
/// allows (`OutboundRetryPolicy`). Used by the `devicecheck` CLI, `apple check`, the fallback
/// exchange and the admin API.
package struct DeviceCheckClient: Sendable {
    package let client: OutboundHTTPClient
    package let configuration: AppleConfiguration
    package let retryPolicy: OutboundRetryPolicy

    package init(
        client: OutboundHTTPClient, configuration: AppleConfiguration,
        retryPolicy: OutboundRetryPolicy = OutboundRetryPolicy()
    ) {
        self.client = client
        self.configuration = configuration
        self.retryPolicy = retryPolicy
    }

    /// One call. `bits` is required for `.update` (and ignored otherwise).
    package func call(
        _ operation: DeviceCheckOperation, deviceToken: String, bits: (bit0: Bool, bit1: Bool)? = nil,
        environment: AppleEnvironment? = nil, now: Date = Date()
    ) async -> Result<DeviceCheckAnswer, AppleError> {
        let environment = environment ?? self.configuration.environment
        let override = self.configuration.deviceCheckOverride
        let request: OutboundHTTPRequest
        do {
            switch operation {
            case .query:
                request = try DeviceCheckRequest.query(
                    deviceToken: deviceToken, timestamp: now, environment: environment, override: override)
            case .validate:
                request = try DeviceCheckRequest.validate(
                    deviceToken: deviceToken, timestamp: now, environment: environment, override: override)
            case .update:
                guard let bits else {
                    return .failure(AppleError(.invalidRequest, "update_two_bits needs bit0 and bit1"))
                }
                request = try DeviceCheckRequest.update(
                    deviceToken: deviceToken, bit0: bits.bit0, bit1: bits.bit1, timestamp: now,
                    environment: environment, override: override)
            }
        } catch {
            return .failure(error)
        }
        let result = await self.send(request).mapError { AppleError($0) }
        return result.flatMap { response in
            Result { () throws(AppleError) in
                try DeviceCheckAnswer.decode(operation, status: response.status, body: response.body)
            }
        }
    }

    /// `request` within the DeviceCheck timeout, sent again after a 429, a 5xx or no answer
    /// while the deadline allows (`retryPolicy`); the wait is a task sleep, never a loop's.
    private func send(_ request: OutboundHTTPRequest) async -> Result<OutboundHTTPResponse, OutboundHTTPError> {
        let clock = ContinuousClock()
        let deadline = clock.now + self.configuration.deviceCheck.timeout
        var attempt = 1
        while true {
            let result = await self.client.send(request, timeout: deadline - clock.now)
            let decision = self.retryPolicy.decide(
                after: result, attempt: attempt, remaining: deadline - clock.now,
                breakerOpen: self.client.breakerState == .open, jitter: Double.random(in: 0...1))
            guard case .retry(let delay) = decision else { return result }
            self.client.metrics.retried(service: request.service)
            try? await Task.sleep(for: delay)
            attempt += 1
        }
    }

    /// The answer as the CLI prints it: `{"bit0","bit1","last_update_time"}`,
    /// `{"bits_set":false}` for "Failed to find bit state", `{"valid":true}` for a valid token,
    /// `{"updated":true}` for an accepted update.
    package static func json(_ answer: DeviceCheckAnswer, operation: DeviceCheckOperation) -> String {
        switch answer {
        case .bits(let bits):
            return #"{"bit0":\#(bits.bit0),"bit1":\#(bits.bit1),"last_update_time":"\#(bits.lastUpdateTime)"}"#
        case .bitsNeverSet:
            return #"{"bits_set":false}"#
        case .accepted:
            return operation == .update ? #"{"updated":true}"# : #"{"valid":true}"#
        }
    }

    /// An error as the CLI prints it: `{"error":CODE,"status":N,"reason":TEXT}`.
    package static func json(_ error: AppleError) -> String {
        let status = error.status.map { ",\"status\":\($0)" } ?? ""
        return #"{"error":"\#(error.code)"\#(status),"reason":\#(Self.quoted(error.reason))}"#
    }

    private static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20:
                out +=
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
