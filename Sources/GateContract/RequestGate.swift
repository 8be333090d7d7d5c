package import GatewayIO
package import HTTP1

/// The one point where enforcement plugs into the proxy.
///
/// The connection calls `classify` on its queue as soon as a request head is parsed,
/// then (if the classification asks for it) reads the body up to the cap, then calls
/// `decide`. Nothing is sent upstream before `decide` completes with `.forward`.
package protocol RequestGate: Sendable {
    /// Chooses the route for a head. Must be cheap and non-blocking. `client` is the client
    /// address's limit key (`IPAddressBytes.limitKey`, after `trusted_proxies`).
    func classify(_ head: HTTPRequestHead, client: String) -> GateClassification

    /// Decides the request's fate: called on the connection's loop (`promise.loop`), and
    /// fulfils `promise` exactly once. `body` is the complete body when the classification
    /// asked for buffering, else nil. A gate's store calls go out on `promise.loop`, so that a
    /// decision reached through the store needs no hop back. `head` is consumed: the connection
    /// hands over its only reference to the fields, so a gate that adds a field to the head it
    /// forwards appends in place instead of copying them.
    func decide(
        _ head: consuming HTTPRequestHead,
        body: [UInt8]?,
        classification: GateClassification,
        promise: GateDecisionPromise
    )
}

package struct GateClassification: Sendable {
    /// Route name for logs and metrics ("-" when none matched).
    package var routeName: String { self.names.routeName }
    /// Upstream name to forward to; nil when the gateway answers itself (endpoints, no route).
    package var upstream: String? { self.names.upstream }
    /// Buffer the whole body, at most this many bytes (413 beyond), before `decide`.
    /// nil = stream the body; `decide` is called with the head only.
    package var bufferBodyUpTo: Int?
    /// The request's trace is sampled: the gate notes the timings its spans need (the store
    /// call's); an unsampled request pays nothing for them. Set by the connection before `decide`.
    package var traced = false
    /// The matched route's index in the gate's route table (matched once, in `classify`).
    package var routeIndex: Int?
    /// Set when the gate already knows the answer from the head alone (an ambiguous target,
    /// missing credentials on an enforce route, a rate limit): `bufferBodyUpTo` is then nil, so
    /// no body byte is buffered or reserved, and `decide` completes with this at once.
    package var refusal: GateDecision? { self.refusalBox?.decision }
    /// `refusal != nil`, without copying the decision out of its box (read on every request).
    package var isRefused: Bool { self.refusalBox != nil }
    /// Boxed: a classification is copied several times per request, a `GateDecision` is large.
    private var refusalBox: Refusal?

    private final class Refusal: Sendable {
        let decision: GateDecision
        init(_ decision: GateDecision) { self.decision = decision }
    }
    /// The client address's limit key `classify` was given (a stable client attribute, e.g. for
    /// a gradual rollout's arm when the request carries no key ID).
    package var client: String { self.names.client }
    /// The gateway endpoint the request is for (no route then); nil otherwise.
    package var endpoint: GateEndpoint? { self.names.endpoint }
    /// How the request is judged on its route, decided here once; nil off the routes.
    package var judgement: RouteJudgement? { self.names.judgement }
    /// The credential headers, decoded in `classify` (decoding them costs more than the rest
    /// of it), so `decide` does not decode them again; nil when absent or undecodable.
    package var credentials: AssertionCredentials? { self.names.credentials }

    /// The strings, boxed and immutable: the connection copies a classification about three
    /// times per request, and a copy is then one retain instead of one per string.
    private let names: Names

    private final class Names: Sendable {
        let routeName: String
        let upstream: String?
        let client: String
        let endpoint: GateEndpoint?
        let judgement: RouteJudgement?
        let credentials: AssertionCredentials?

        init(
            routeName: String, upstream: String?, client: String, endpoint: GateEndpoint?,
            judgement: RouteJudgement?, credentials: AssertionCredentials?
        ) {
            self.routeName = routeName
            self.upstream = upstream
            self.client = client
            self.endpoint = endpoint
            self.judgement = judgement
            self.credentials = credentials
        }
    }

    package init(
        routeName: String, upstream: String?, bufferBodyUpTo: Int?, routeIndex: Int? = nil,
        refusal: GateDecision? = nil, client: String = "", endpoint: GateEndpoint? = nil,
        judgement: RouteJudgement? = nil, credentials: AssertionCredentials? = nil
    ) {
        self.names = Names(
            routeName: routeName, upstream: upstream, client: client, endpoint: endpoint, judgement: judgement,
            credentials: credentials)
        self.bufferBodyUpTo = refusal == nil ? bufferBodyUpTo : nil
        self.routeIndex = routeIndex
        self.refusalBox = refusal.map(Refusal.init)
    }

    /// A refusal decided from the head alone: `response` with its verdict in the log line,
    /// no upstream, no body buffered.
    package static func refused(
        route: String, routeIndex: Int?, response: LocalResponse, verdict: AttestVerdict
    ) -> GateClassification {
        GateClassification(
            routeName: route, upstream: nil, bufferBodyUpTo: nil, routeIndex: routeIndex,
            refusal: .respond(response, GateLogInfo(verdict: verdict)))
    }
}

/// `indirect`: a decision is copied and destroyed several times on its way from the gate
/// through the completion closures to the connection; boxed, each copy is one retain instead
/// of one per string and array in the head (−900 instructions per passthrough request,
/// callgrind, BENCHMARKS.md).
package indirect enum GateDecision: Sendable {
    /// Forward with this (rewritten) head: the gate already removed client-sent
    /// identity headers and added its own.
    case forward(HTTPRequestHead, GateLogInfo)
    /// Answer locally and do not contact the upstream.
    case respond(LocalResponse, GateLogInfo)
}

/// What the access log records about the gate's verdict.
package struct GateLogInfo: Sendable {
    /// The metrics and access-log verdict label.
    package var verdict: AttestVerdict
    /// The key ID (base64) when the request named one, or nil. The access log writes it as
    /// `access_log.key_id` says (`AccessLogKeyIDFormat`).
    package var keyID: String?
    /// The rollout arm on routes with `enforce_percent` < 100.
    package var arm: RolloutArm?
    /// `android` when the key is an Android Keystore key (the access log's `platform`); nil
    /// for App Attest keys and requests without a verified key.
    package var platform: String? = nil
    /// The store call's timing and outcome, noted only while tracing is on
    /// (`StoreCallSpan`): the proxy makes it a span of a sampled request.
    package var storeCall: StoreCallSpan? = nil

    package init(verdict: AttestVerdict, keyID: String? = nil, arm: RolloutArm? = nil) {
        self.verdict = verdict
        self.keyID = keyID
        self.arm = arm
    }
}

/// A complete response produced by the gateway itself.
package struct LocalResponse: Sendable {
    package var status: Int
    package var headers: HTTPHeaders
    package var body: [UInt8]
    /// The stable code of an error answer (the body's `error`), nil for any other answer: the
    /// access log's `code` and `attest_gateway_refusals_total{code}` read it from here, so no
    /// refusal, before routing or after, reaches either without its code.
    package var errorCode: String?

    package init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], errorCode: String? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.errorCode = errorCode
    }

    /// `{"error": code, "message": message}` with `Content-Type: application/json`.
    package static func jsonError(status: Int, code: String, message: String) -> LocalResponse {
        let body = "{\"error\":\(JSONText.quote(code)),\"message\":\(JSONText.quote(message))}"
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        return LocalResponse(status: status, headers: headers, body: Array(body.utf8), errorCode: code)
    }
}
