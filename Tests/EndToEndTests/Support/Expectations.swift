import Testing

/// A refused request: `status`, JSON body `{"error": code, "message": …}`.
func expectDenied(
    _ response: HTTPResponse,
    _ status: Int,
    _ code: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(response.status == status, "expected \(status) \(code), got \(response)", sourceLocation: sourceLocation)
    #expect(response.errorCode == code, "expected \(code), got \(response)", sourceLocation: sourceLocation)
    #expect(
        response.header("Content-Type") == "application/json",
        "Content-Type of \(response)",
        sourceLocation: sourceLocation
    )
    let message = (try? response.json())?["message"] as? String
    #expect(message?.isEmpty == false, "no message in \(response)", sourceLocation: sourceLocation)
}

/// A request on a monitor route that failed with `code` and was forwarded anyway: the upstream
/// answered, and saw `X-App-Attest-Status: failed; reason=<code>` and no identity headers.
func expectFlagged(_ response: HTTPResponse, _ code: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(
        response.status == 200,
        "expected a forward flagged \(code), got \(response)",
        sourceLocation: sourceLocation
    )
    guard let echo = try? UpstreamEcho(response) else {
        Issue.record("not an upstream echo: \(response)", sourceLocation: sourceLocation)
        return
    }
    #expect(
        echo.appHeaders == ["x-app-attest-status": ["failed; reason=\(code)"]],
        "upstream saw \(echo.appHeaders)",
        sourceLocation: sourceLocation
    )
}

/// A verified forward: the upstream saw `verified` and the key's identity.
func expectVerified(
    _ response: HTTPResponse,
    app: SimulatedApp,
    counter: UInt32? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(response.status == 200, "expected a verified forward, got \(response)", sourceLocation: sourceLocation)
    guard let echo = try? UpstreamEcho(response) else {
        Issue.record("not an upstream echo: \(response)", sourceLocation: sourceLocation)
        return
    }
    #expect(echo.appHeaders["x-app-attest-status"] == ["verified"], sourceLocation: sourceLocation)
    #expect(echo.appHeaders["x-app-attest-key-id"] == [app.keyID], sourceLocation: sourceLocation)
    if let counter {
        #expect(echo.appHeaders["x-app-attest-counter"] == [String(counter)], sourceLocation: sourceLocation)
    }
}
