package import PolicyModel

extension ClientSubjectHeaders {
    /// The names a policy reserves. Apart from the type so that the header rules compile without
    /// the policy (the correlation fuzz harness, Fuzz/correlation/run.sh, builds them alone).
    package init(policy: GatewayPolicy) {
        self.init(policy.clientSubjectHeaderNames)
    }
}
