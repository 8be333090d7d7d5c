import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The gateway's policy document as the client last saw it, and the route a request takes.
///
/// The document is cached per its `Cache-Control: max-age` (60 s without one) and revalidated
/// with its `ETag`. A failed fetch keeps the stale document, which beats none; with no document
/// at all, requests take `fallbackRoute` and the fetch is not tried again before
/// `retryInterval`, so that a gateway without the endpoint is not asked on every request.
/// Concurrent requests share one fetch.
actor PolicyCache {
    private let api: GatewayAPI
    private let clock: any AttestClock
    private let path: String
    private let retryInterval: Duration
    private let fallbackRoute: GatewayPolicyDocument.Route

    private var cached: (document: GatewayPolicyDocument, etag: String?, expires: Date)?
    private var fetch: Task<GatewayPolicyDocument?, Never>?
    private var retryAt: Date?

    init(
        api: GatewayAPI,
        clock: any AttestClock,
        path: String,
        retryInterval: Duration,
        fallbackRoute: GatewayPolicyDocument.Route
    ) {
        self.api = api
        self.clock = clock
        self.path = path
        self.retryInterval = retryInterval
        self.fallbackRoute = fallbackRoute
    }

    /// The route of `method target`: nil when the document has none (the gateway does not
    /// protect it), `fallbackRoute` when there is no document.
    func route(method: String, target: String, force: Bool = false) async -> GatewayPolicyDocument.Route? {
        guard let document = await self.document(force: force) else { return self.fallbackRoute }
        return document.route(method: method, target: target)
    }

    /// The route to use after the gateway answered `assertion_missing` / `challenge_missing` to a
    /// request sent per `previous`: the refreshed document's, when it explains the refusal.
    func route(
        method: String,
        target: String,
        after refusal: AttestedClientError,
        was previous: GatewayPolicyDocument.Route?
    ) async -> GatewayPolicyDocument.Route {
        let refreshed = await self.route(method: method, target: target, force: true)
        return Self.protectedRoute(after: refusal, refreshed: refreshed, was: previous, fallback: self.fallbackRoute)
    }

    /// The refreshed route when it explains `refusal`; else `previous` (or `fallback`) made as
    /// strict as the gateway asked: signed, and with a challenge on 428. The gateway is the
    /// authority; a document that still disagrees with it is stale or cached on the way.
    static func protectedRoute(
        after refusal: AttestedClientError,
        refreshed: GatewayPolicyDocument.Route?,
        was previous: GatewayPolicyDocument.Route?,
        fallback: GatewayPolicyDocument.Route
    ) -> GatewayPolicyDocument.Route {
        if let refreshed, refreshed != previous, refreshed.mode != .off,
            refusal.code != .challengeMissing || refreshed.challenge == .required
        {
            return refreshed
        }
        var stricter = previous ?? fallback
        stricter.mode = .enforce
        if refusal.code == .challengeMissing { stricter.challenge = .required }
        return stricter
    }

    // Endpoint paths per the cached document, never fetched for this alone: a gateway
    // without a document still serves its defaults.
    var challengePath: String { self.cached?.document.endpoints.challenge ?? "/app-attest/challenge" }
    var attestPath: String { self.cached?.document.endpoints.attest ?? "/app-attest/attest" }
    var deviceCheckPath: String { self.cached?.document.endpoints.devicecheck ?? "/app-attest/devicecheck" }
    var reportPath: String { self.cached?.document.endpoints.report ?? "/app-attest/report" }

    /// The document, from the cache while fresh (unless `force`); nil when unavailable.
    func document(force: Bool) async -> GatewayPolicyDocument? {
        let now = self.clock.now()
        if !force, let cached = self.cached, now < cached.expires { return cached.document }
        if !force, self.cached == nil, let retryAt = self.retryAt, now < retryAt { return nil }
        if let running = self.fetch { return await running.value }
        let task = Task { await self.fetchDocument() }
        self.fetch = task
        let document = await task.value
        self.fetch = nil
        return document
    }

    private func fetchDocument() async -> GatewayPolicyDocument? {
        var request = URLRequest(url: self.api.url(self.path))
        request.httpMethod = "GET"
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if let etag = self.cached?.etag { request.setValue(etag, forHTTPHeaderField: "If-None-Match") }
        let now = self.clock.now()
        guard let (data, response) = try? await self.api.send(request) else {
            self.retryAt = now.addingTimeInterval(self.retryInterval.timeInterval)
            return self.cached?.document
        }
        let maxAge = Self.maxAge(response.value(forHTTPHeaderField: "Cache-Control")) ?? 60
        if response.statusCode == 304, var cached = self.cached {
            cached.expires = now.addingTimeInterval(maxAge)
            self.cached = cached
            return cached.document
        }
        guard response.statusCode == 200,
            let document = try? JSONDecoder().decode(GatewayPolicyDocument.self, from: data),
            document.version == GatewayPolicyDocument.supportedVersion
        else {
            self.retryAt = now.addingTimeInterval(self.retryInterval.timeInterval)
            return self.cached?.document
        }
        self.cached = (document, response.value(forHTTPHeaderField: "ETag"), now.addingTimeInterval(maxAge))
        return document
    }

    static func maxAge(_ cacheControl: String?) -> TimeInterval? {
        guard let cacheControl else { return nil }
        for directive in cacheControl.split(separator: ",") {
            let parts = directive.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "max-age", let seconds = Int(parts[1]) {
                return TimeInterval(seconds)
            }
        }
        return nil
    }
}
