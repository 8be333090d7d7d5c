import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTPProxy

/// `serve` with a bad policy drops its `GatewayServer` (and the per-loop contexts) while the
/// loops still tick. The loops' batch hook read the context `unowned`, and the next tick
/// aborted the process (exit status 134 in about 1 of 60 runs of `serve --config bad.yaml`).
@Suite struct LoopContextLifetimeTests {
    @Test func loopsThatOutliveTheirServerKeepTickingHarmlessly() async throws {
        var loops: [EventLoop] = []
        do {
            let server = try GatewayServer(loopCount: 2, accessLog: AccessLog())
            loops = server.group.loops
            // Let each loop install the server's batch hook before the server goes.
            for loop in loops {
                await withCheckedContinuation { done in loop.execute { done.resume() } }
            }
        }
        // Three ticks (100 ms each) call the hook of the freed context; the unowned read
        // stopped the whole test process here.
        try await Task.sleep(for: .milliseconds(350))
        for loop in loops {
            await withCheckedContinuation { done in
                loop.execute {
                    loop.close()
                    done.resume()
                }
            }
        }
        #expect(loops.count == 2)
    }
}
