/// The entries of one YAML mapping, by key, with their positions.
struct Fields {
    let node: YAMLNode
    private let byKey: [String: YAMLEntry]

    init(node: YAMLNode, entries: [YAMLEntry]) {
        self.node = node
        var byKey: [String: YAMLEntry] = [:]
        for entry in entries { byKey[entry.key] = entry }
        self.byKey = byKey
    }

    subscript(key: String) -> YAMLNode? { self.byKey[key]?.value }

    /// The key's own position (the mapping's when absent).
    func keyMark(_ key: String) -> YAMLMark { self.byKey[key]?.keyMark ?? self.node.mark }

    func path(_ key: String) -> String { self.node.path.isEmpty ? key : "\(self.node.path).\(key)" }
}
