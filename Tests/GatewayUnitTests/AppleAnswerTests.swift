import Foundation
import GatewayTesting
import Testing

@testable import AppleClient

@Suite struct AppleAnswerTests {
    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func queryAnswers() throws {
        let bits = try DeviceCheckAnswer.decode(
            .query, status: 200, body: Self.bytes(#"{"bit0":true,"bit1":false,"last_update_time":"2026-11"}"#))
        #expect(bits == .bits(DeviceCheckBits(bit0: true, bit1: false, lastUpdateTime: "2026-11")))
        #expect(
            try DeviceCheckAnswer.decode(.query, status: 200, body: Self.bytes("Failed to find bit state"))
                == .bitsNeverSet)
        #expect(
            try DeviceCheckAnswer.decode(.query, status: 200, body: Self.bytes("Failed to find bit state\n"))
                == .bitsNeverSet)
        for malformed in [
            "", "not json", #"{"bit0":true}"#, #"{"bit0":"yes","bit1":false,"last_update_time":"2026-11"}"#,
            #"{"bit0":true,"bit1":false,"last_update_time":"2026-13"}"#,
            #"{"bit0":true,"bit1":false,"last_update_time":"26-11"}"#, "[1,2]",
        ] {
            #expect(throws: AppleError(.malformedAnswer, "")) {
                try DeviceCheckAnswer.decode(.query, status: 200, body: Self.bytes(malformed))
            }
        }
    }

    @Test func updateAndValidateAnswerWithTheStatusAlone() throws {
        #expect(try DeviceCheckAnswer.decode(.update, status: 200, body: []) == .accepted)
        #expect(try DeviceCheckAnswer.decode(.validate, status: 200, body: []) == .accepted)
    }

    @Test func errorStatusesMapToStableCodes() {
        let cases: [(Int, AppleError.Code)] = [
            (400, .badRequest), (401, .unauthorized), (429, .throttled), (500, .serverError), (503, .serverError),
            (418, .unexpectedStatus), (302, .unexpectedStatus),
        ]
        for operation in DeviceCheckOperation.allCases {
            for (status, code) in cases {
                do {
                    _ = try DeviceCheckAnswer.decode(
                        operation, status: status, body: Self.bytes("Missing or badly formatted authorization token"))
                    Issue.record("\(status) decoded")
                } catch {
                    #expect(error.code == code && error.status == status, "\(status): \(error)")
                }
            }
        }
        for (status, code) in cases where status != 302 {
            #expect(throws: AppleError(code, "")) { try FraudRiskAnswer.decode(status: status, body: []) }
        }
        #expect(AppleError(.throttled, "").isTransient && AppleError(.serverError, "").isTransient)
        #expect(AppleError(.unreachable, "").isTransient)
        #expect(!AppleError(.unauthorized, "").isTransient && !AppleError(.badRequest, "").isTransient)
    }

    @Test func applesTextIsQuotedButBoundedAndPrintable() {
        do {
            _ = try DeviceCheckAnswer.decode(
                .query, status: 400, body: Self.bytes("Missing or incorrectly formatted device token payload"))
        } catch {
            #expect(error.reason.contains("\"Missing or incorrectly formatted device token payload\""))
        }
        do {
            _ = try DeviceCheckAnswer.decode(
                .query, status: 400, body: [0x1B, 0x5B] + [UInt8](repeating: 0x41, count: 1000))
        } catch {
            #expect(!error.reason.contains("\u{1B}"))
            #expect(error.reason.contains("..."))
            #expect(error.reason.utf8.count < 400)
        }
    }

    @Test func fraudRiskAnswers() throws {
        let receipt: [UInt8] = Array(0..<255)
        let base64 = Data(receipt).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        #expect(try FraudRiskAnswer.decode(status: 200, body: Self.bytes(base64 + "\n")) == .receipt(receipt))
        #expect(try FraudRiskAnswer.decode(status: 304, body: []) == .notModified)
        #expect(try FraudRiskAnswer.decode(status: 404, body: []) == .noData)
        for malformed in ["", "!!!", "AAA"] {
            #expect(throws: AppleError(.malformedAnswer, "")) {
                try FraudRiskAnswer.decode(status: 200, body: Self.bytes(malformed))
            }
        }
    }
}
