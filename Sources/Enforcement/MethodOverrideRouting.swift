import HTTP1
import PolicyModel

/// The route a request with method overrides (`HTTPMethodOverrides`) is judged under.
///
/// Every method the request may become is looked up. When all of them reach the request line's
/// route, nothing changes. Otherwise:
/// - a form POST (its body may name any method) is judged under the strictest route that any
///   method reaches (`RouteStrictness`): a browser's form is ordinary, so it is judged, not refused;
/// - an explicit override (a field or `_method` in the query) is refused with 400
///   `method_override_refused`, unless the request line's route says
///   `allow_method_overrides: true`: then it too is judged under the strictest route.
/// A method that reaches no route counts as the weakest; if the request line's method reaches
/// none but an override does, there is no route to allow overrides, and an explicit override is
/// refused.
enum MethodOverrideRouting {
    /// A method no route names: where the request lands if its form names such a method.
    static let unnamedMethod = "ATTEST-GATEWAY-UNNAMED-METHOD"

    /// The route index to judge the request under (nil: no route), or the refusal.
    static func route(
        table: RouteTable, target: Substring, lineRoute: Int?, overrides: HTTPMethodOverrides
    ) -> Result<Int?, EnforcementError> {
        var methods = overrides.methods
        if overrides.couldBeAnyMethod {
            for method in table.namedMethods + [Self.unnamedMethod] where !methods.contains(method) {
                methods.append(method)
            }
        }
        var strictest = lineRoute
        var differs = false
        for method in methods {
            guard case .route(let index) = table.lookup(method: method, target: target) else {
                // The target reads the same for every method: only "no route" is left here.
                if lineRoute != nil { differs = true }
                continue
            }
            if index == lineRoute { continue }
            differs = true
            guard let current = strictest else {
                strictest = index
                continue
            }
            if RouteStrictness(table.routes[current]) < RouteStrictness(table.routes[index]) { strictest = index }
        }
        guard differs else { return .success(lineRoute) }
        let explicit = !overrides.methods.isEmpty
        if explicit && !(lineRoute.map { table.routes[$0].allowMethodOverrides } ?? false) {
            let line = lineRoute.map { "route \(table.routes[$0].name)" } ?? "no route"
            return .failure(
                EnforcementError(
                    .methodOverrideRefused,
                    "a method override (\(overrides.methods.joined(separator: ", "))) would take this request from \(line) to another; the upstream may run it as that method. Send the method in the request line, or set allow_method_overrides: true on \(line)"
                ))
        }
        return .success(strictest)
    }
}
