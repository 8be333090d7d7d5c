/// The lint of `tokens:` and `accept_token:`: debug tokens exchanged for real tokens under
/// production, an issuer that JWT authorizers refuse, and `accept_token` where it does nothing.
extension PolicyLint {
    func tokenWarnings(_ policy: GatewayPolicy, source: PolicySourceMap) -> [PolicyWarning] {
        var warnings: [PolicyWarning] = []
        func warn(_ code: String, _ fields: Fields, _ key: String, _ message: String) {
            let mark = fields.keyMark(key)
            warnings.append(
                PolicyWarning(
                    code: code, file: self.file, line: mark.line, column: mark.column, field: fields.path(key),
                    message: message))
        }
        if let tokens = policy.tokens, let node = source.top["tokens"], case .mapping = node.content,
            let fields = try? PolicyScalarReader(file: self.file).mapping(node, keys: TokensDecoder.keys)
        {
            if tokens.allowDebugTokens && policy.environment == .production {
                warn(
                    "debug_tokens_in_production", fields, "allow_debug_tokens",
                    "debug tokens are exchanged for attestation tokens under environment: production: anyone holding a debug token gets a token every service accepts"
                )
            }
            if !tokens.issuer.hasPrefix("https://") {
                warn(
                    "token_issuer_not_https", fields, "issuer",
                    "AWS API Gateway and most OpenID clients accept only an https issuer (its discovery document is fetched there)"
                )
            }
        }
        for (route, fields) in zip(policy.routes, source.routes) where route.acceptToken != nil {
            if route.mode == .off {
                warn(
                    "setting_without_effect", fields, "accept_token",
                    "has no effect: the route's mode is off (requests pass without attestation)")
            } else if route.riskMetric != nil {
                // The token carries the metric it was issued with, not a verdict of this route.
                warn(
                    "token_skips_route_checks", fields, "accept_token",
                    "token requests are not held to this route's max_risk_metric (assertions are): drop accept_token here, or accept the weaker check"
                )
            }
        }
        return warnings
    }
}
