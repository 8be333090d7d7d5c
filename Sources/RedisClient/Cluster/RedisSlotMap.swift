/// Which primary serves each of the 16384 slots of a Redis Cluster. Pure value: built from a
/// `CLUSTER SHARDS` (Redis ≥ 7) or `CLUSTER SLOTS` reply, updated by `MOVED`.
///
/// Only primaries are kept: counters and challenges are read and written on primaries only
/// (a replica may lag, and a counter read there would let a replay through).
package struct RedisSlotMap: Sendable, Hashable {
    /// Distinct primaries, sorted (stable across refreshes of an unchanged cluster).
    package private(set) var primaries: [RedisNodeAddress]
    /// `owners[slot]` indexes `primaries`; `unassigned` when no primary serves the slot.
    private var owners: [UInt16]
    private static let unassigned = UInt16.max

    /// An empty map (every slot unassigned).
    package init() {
        self.primaries = []
        self.owners = Array(repeating: Self.unassigned, count: RedisHashSlot.count)
    }

    /// The primary that serves `slot`, if any.
    package func primary(forSlot slot: Int) -> RedisNodeAddress? {
        guard slot >= 0, slot < RedisHashSlot.count else { return nil }
        let index = self.owners[slot]
        return index == Self.unassigned ? nil : self.primaries[Int(index)]
    }

    /// Slots without a primary.
    package var unassignedSlotCount: Int { self.owners.count { $0 == Self.unassigned } }

    /// `MOVED`: `slot` is served by `node` from now on.
    package mutating func assign(slot: Int, to node: RedisNodeAddress) {
        guard slot >= 0, slot < RedisHashSlot.count else { return }
        self.owners[slot] = self.index(of: node)
    }

    private mutating func assign(_ range: ClosedRange<Int>, to node: RedisNodeAddress) {
        let index = self.index(of: node)
        for slot in range { self.owners[slot] = index }
    }

    private mutating func index(of node: RedisNodeAddress) -> UInt16 {
        if let existing = self.primaries.firstIndex(of: node) { return UInt16(existing) }
        self.primaries.append(node)
        return UInt16(self.primaries.count - 1)
    }

    /// Sorts `primaries` so that equal topologies compare equal.
    private mutating func normalize() {
        let sorted = self.primaries.sorted()
        let remap = self.primaries.map { UInt16(sorted.firstIndex(of: $0)!) }
        self.owners = self.owners.map { $0 == Self.unassigned ? $0 : remap[Int($0)] }
        self.primaries = sorted
    }

    // MARK: - Parsing

    /// `CLUSTER SLOTS`: `[[start, end, [host, port, id, …], replica…], …]`. An empty or `?`
    /// host means "the host you asked": `seedHost`.
    package init(clusterSlots reply: RedisReply, seedHost: String) throws(RedisClusterError) {
        self.init()
        guard case .array(let ranges) = reply else {
            throw .badTopology("CLUSTER SLOTS did not return an array: \(reply.summary)")
        }
        for range in ranges {
            guard case .array(let items) = range, items.count >= 3,
                case .integer(let start) = items[0], case .integer(let end) = items[1],
                let bounds = Self.slotRange(start, end)
            else {
                throw .badTopology("CLUSTER SLOTS entry is not [start, end, node, …]: \(range.summary)")
            }
            guard case .array(let node) = items[2], node.count >= 2, let host = node[0].text,
                case .integer(let port) = node[1], let port = UInt16(exactly: port), port > 0
            else {
                throw .badTopology("CLUSTER SLOTS node of slots \(start)-\(end) is not [host, port, …]")
            }
            self.assign(bounds, to: RedisNodeAddress(host: Self.host(host, seedHost: seedHost), port: port))
        }
        self.normalize()
    }

    /// `CLUSTER SHARDS` (RESP2: maps are flat key/value arrays):
    /// `[["slots", [s, e, …], "nodes", [["id", …, "port", p, "ip", …, "endpoint", …, "role",
    /// "master", …, "health", "online"], …]], …]`. The shard's online primary serves its slots.
    /// `usesTLS` (`rediss-cluster://`): the node's `tls-port` first, else its `port`.
    package init(clusterShards reply: RedisReply, seedHost: String, usesTLS: Bool = false) throws(RedisClusterError) {
        self.init()
        guard case .array(let shards) = reply else {
            throw .badTopology("CLUSTER SHARDS did not return an array: \(reply.summary)")
        }
        for shard in shards {
            let fields = try Self.fields(shard, what: "CLUSTER SHARDS entry")
            guard case .array(let slotBounds)? = fields["slots"], slotBounds.count % 2 == 0,
                case .array(let nodes)? = fields["nodes"]
            else {
                throw .badTopology("CLUSTER SHARDS entry lacks slots or nodes: \(shard.summary)")
            }
            if slotBounds.isEmpty { continue }  // a shard without slots (new node, or emptied)
            var primary: RedisNodeAddress?
            for node in nodes {
                let node = try Self.fields(node, what: "CLUSTER SHARDS node")
                guard node["role"]?.text == "master", node["health"]?.text ?? "online" == "online" else { continue }
                let ports = usesTLS ? [node["tls-port"], node["port"]] : [node["port"], node["tls-port"]]
                guard let port = ports.lazy.compactMap({ $0?.integerValue }).first(where: { $0 > 0 }),
                    let port = UInt16(exactly: port), port > 0
                else {
                    throw .badTopology("CLUSTER SHARDS primary without a port")
                }
                let host = node["endpoint"]?.text ?? node["ip"]?.text ?? ""
                primary = RedisNodeAddress(host: Self.host(host, seedHost: seedHost), port: port)
            }
            guard let primary else { continue }  // failing over: its slots stay unassigned
            for index in stride(from: 0, to: slotBounds.count, by: 2) {
                guard let start = slotBounds[index].integerValue, let end = slotBounds[index + 1].integerValue,
                    let bounds = Self.slotRange(start, end)
                else {
                    throw .badTopology("CLUSTER SHARDS slot range is not two numbers 0-16383")
                }
                self.assign(bounds, to: primary)
            }
        }
        self.normalize()
    }

    private static func slotRange(_ start: Int64, _ end: Int64) -> ClosedRange<Int>? {
        guard start >= 0, start <= end, end < RedisHashSlot.count else { return nil }
        return Int(start)...Int(end)
    }

    private static func host(_ host: String, seedHost: String) -> String {
        host.isEmpty || host == "?" ? seedHost : host
    }

    private static func fields(_ reply: RedisReply, what: String) throws(RedisClusterError) -> [String: RedisReply] {
        guard case .array(let items) = reply, items.count % 2 == 0 else {
            throw .badTopology("\(what) is not a map: \(reply.summary)")
        }
        var fields: [String: RedisReply] = [:]
        for index in stride(from: 0, to: items.count, by: 2) {
            guard let name = items[index].text else { throw .badTopology("\(what) has a non-text field name") }
            fields[name] = items[index + 1]
        }
        return fields
    }
}

extension RedisReply {
    /// A status or bulk string as UTF-8 text.
    package var text: String? {
        switch self {
        case .status(let s): return s
        case .bulk(let b): return String(decoding: b, as: UTF8.self)
        default: return nil
        }
    }

    /// An integer, or a bulk string holding one.
    var integerValue: Int64? {
        switch self {
        case .integer(let i): return i
        case .bulk, .status: return self.text.flatMap { Int64($0) }
        default: return nil
        }
    }
}
