import Foundation
import GatewayTesting
import Testing

extension EndToEnd {
    /// `readiness.require_store: auto` on the built binary: with every protected route on
    /// `on_store_error: allow`, a Redis outage leaves `/readyz` 200 (saying the store is
    /// unavailable); one fail-closed route makes it 503. Both return to `store: ok` after.
    @Suite struct Readiness {
        static let lenientRoutes = """
              - name: lenient
                match: { path_prefix: /lenient }
                upstream: api
                mode: enforce
                on_store_error: allow
              - name: public
                match: { path_prefix: /public }
                upstream: api
                mode: off
            """
        static let strictRoutes =
            lenientRoutes + """

                  - name: strict
                    match: { path_prefix: /strict }
                    upstream: api
                    mode: enforce
                """

        static func readiness(_ gateway: GatewayInstance) throws -> (status: Int, store: String?) {
            let answer = try gateway.admin("/readyz")
            return (answer.status, try answer.json()["store"] as? String)
        }

        @Test(.timeLimit(.minutes(1)))
        func autoStaysReadyOnlyWhenNoRouteFailsClosed() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let extra = "readiness: { require_store: auto, store_ping_timeout: 500ms }"
            let open = try world.startGateway("open", extra: extra, routes: Self.lenientRoutes)
            let closed = try world.startGateway("closed", extra: extra, routes: Self.strictRoutes)
            #expect(try Self.readiness(open) == (200, "ok"))
            #expect(try Self.readiness(closed) == (200, "ok"))

            world.redis.kill()
            let seen = eventually(timeout: .seconds(10)) {
                (try? Self.readiness(closed))?.status == 503
            }
            #expect(seen, "the fail-closed gateway stayed ready without Redis")
            #expect(try Self.readiness(closed).store == "unavailable")
            let degraded = try Self.readiness(open)
            #expect(degraded == (200, "unavailable"), "\(degraded)")
            #expect(try open.request("GET", "/public/x").status == 200)

            try world.redis.restart()
            // Each gateway reconnects on its own backoff: wait for both, not for the first.
            for gateway in [closed, open] {
                let back = eventually(timeout: .seconds(10)) {
                    (try? Self.readiness(gateway)).map { $0 == (200, "ok") } ?? false
                }
                #expect(back, "/readyz did not return to 200 and store ok after Redis came back")
            }
        }
    }
}
