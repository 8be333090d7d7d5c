/// How strict a route's judgement is, for a request that could reach several routes (a method
/// override: `MethodOverrides`): such a request is judged under the strictest.
///
/// Compared in this order, the first difference deciding:
/// 1. mode: `enforce` > `monitor` > `off`;
/// 2. `enforce_percent` (a larger enforced share is stricter);
/// 3. `challenge: required` over `none`;
/// 4. `binding: body` over `request`;
/// 5. no debug tokens over `allow_debug_tokens: true`;
/// 6. no fallback over `fallback: devicecheck`;
/// 7. `on_store_error: deny` over `allow`.
/// Equal routes keep the one found first (the request line's method comes first).
public struct RouteStrictness: Comparable, Sendable {
    private let ranks: [Int]

    public init(_ route: RoutePolicy) {
        let mode =
            switch route.mode {
            case .enforce: 2
            case .monitor: 1
            case .off: 0
            }
        self.ranks = [
            mode,
            route.mode == .enforce ? route.enforcePercent : 0,
            route.challenge == .required ? 1 : 0,
            route.binding == .body ? 1 : 0,
            route.allowDebugTokens ? 0 : 1,
            route.fallback == .none ? 1 : 0,
            route.onStoreError == .deny ? 1 : 0,
        ]
    }

    public static func < (lhs: RouteStrictness, rhs: RouteStrictness) -> Bool {
        lhs.ranks.lexicographicallyPrecedes(rhs.ranks)
    }
}
