extension PolicyDecoder {
    static let tunnelKeys = ["idle_timeout", "max_lifetime"]

    /// `tunnels:` (`TunnelPolicy`): both durations within `TunnelPolicy.range`.
    func decodeTunnels(_ top: Fields) throws(PolicyError) -> TunnelPolicy {
        var tunnels = TunnelPolicy()
        guard let node = top["tunnels"] else { return tunnels }
        let fields = try self.reader.mapping(node, keys: Self.tunnelKeys)
        if let value = fields["idle_timeout"] {
            tunnels.idleTimeout = try self.reader.duration(value, in: TunnelPolicy.range)
        }
        if let value = fields["max_lifetime"] {
            tunnels.maxLifetime = try self.reader.duration(value, in: TunnelPolicy.range)
        }
        return tunnels
    }
}
