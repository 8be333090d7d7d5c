import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sends one HTTP request and returns the whole response. `URLSessionTransport` in apps.
public protocol HTTPTransport: Sendable {
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse)
}

/// `URLSession.data(for:)`.
public struct URLSessionTransport: HTTPTransport, @unchecked Sendable {
    // URLSession is thread-safe; FoundationNetworking (Linux) does not mark it Sendable.
    public let session: URLSession

    public init(session: URLSession = .shared) {
        self.session = session
    }

    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let (data, response) = try await self.session.data(for: request)
        guard let http = response as? HTTPURLResponse else {
            throw AttestedClientError(.unexpectedResponse, "not an HTTP response")
        }
        return (data, http)
    }
}
