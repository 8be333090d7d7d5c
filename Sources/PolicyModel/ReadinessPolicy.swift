/// `readiness:`: what `/readyz` on the admin listener means (`AdminGate`).
///
/// ```yaml
/// readiness:
///   require_store: auto      # always (default) | auto | never
///   store_ping_timeout: 1s   # 100ms-30s
/// ```
///
/// `/readyz` always needs a loaded policy. The store is pinged every time and its state is in
/// the answer; whether a failed ping makes the instance unready is `require_store`:
/// - `always`: yes. Load balancers stop sending traffic while Redis is down.
/// - `auto`: only when some route fails closed without it (`mode: enforce` or `monitor` with
///   `on_store_error: deny`). With every protected route on `on_store_error: allow`, public and
///   protected routes keep being served while Redis is down, so the instance stays ready
///   (challenges are still issued, being stateless; the attest endpoint answers 503
///   `store_error` then).
/// - `never`: no (for a store the instance cannot fail over from anyway).
public struct ReadinessPolicy: Sendable, Hashable {
    public enum StoreRequirement: String, Sendable, Hashable, CaseIterable {
        case always, auto, never
    }

    public var requireStore: StoreRequirement
    /// How long `/readyz` waits for the store's `PING`.
    public var storePingTimeout: Duration

    /// Bounds of `store_ping_timeout`: under 100 ms a busy but healthy Redis flaps readiness;
    /// beyond 30 s the prober (Kubernetes' default timeout is 1 s) has long given up.
    public static let pingTimeoutRange = Duration.milliseconds(100)...Duration.seconds(30)

    public init(requireStore: StoreRequirement = .always, storePingTimeout: Duration = .seconds(1)) {
        self.requireStore = requireStore
        self.storePingTimeout = storePingTimeout
    }

    /// Whether a store that does not answer makes the instance unready, for these routes.
    public func storeRequired(routes: [RoutePolicy]) -> Bool {
        switch self.requireStore {
        case .always: true
        case .never: false
        case .auto: routes.contains { $0.mode != .off && $0.onStoreError == .deny }
        }
    }
}
