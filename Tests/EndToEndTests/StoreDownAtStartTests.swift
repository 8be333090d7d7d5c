import Foundation
import Testing

extension EndToEnd {
    /// Redis down when the gateway starts: challenges fail closed (503) and the log says why
    /// once per interval, not once per request (it said it 195 times in 2 s before).
    @Suite struct StoreDownAtStart {
        @Test(.timeLimit(.minutes(1)))
        func theChallengeKeyWarningIsThrottled() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            world.redis.kill()
            let gateway = try world.startGateway("gw", waitForReady: false, routes: TestRoutes.standard)
            for _ in 0..<40 {
                let status = try gateway.request("POST", "/app-attest/challenge").status
                #expect(status == 503, "a challenge without its key must fail closed, got \(status)")
            }
            usleep(500_000)
            let warnings = gateway.logEvents("challenge_key_unavailable")
            #expect(warnings.count >= 1, "the outage must be logged")
            #expect(warnings.count <= 2, "\(warnings.count) identical warnings for one outage")
        }
    }
}
