#if canImport(Security)
    import Foundation
    import Security

    /// `KeyStore` in the Keychain: one generic-password item holding `StoredKey` as JSON.
    ///
    /// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`: readable by background requests after
    /// the first unlock, and **never** restored onto another device (an App Attest key lives in
    /// this device's Secure Enclave; its ID elsewhere is useless). After a restore onto the same
    /// device the ID can come back while the key did not: `generateAssertion` then fails with
    /// `invalidKey` and the client enrolls a new key.
    public struct KeychainKeyStore: KeyStore {
        public struct KeychainError: Error, Hashable, CustomStringConvertible {
            public let status: OSStatus
            public let operation: String
            public var description: String { "Keychain \(self.operation) failed: OSStatus \(self.status)" }
        }

        public let service: String
        public let account: String
        public let accessGroup: String?

        /// - Parameters:
        ///   - service / account: the item's identity; one item per gateway.
        ///   - accessGroup: set when an app and its extensions share one key.
        public init(service: String = "attest-gateway", account: String, accessGroup: String? = nil) {
            self.service = service
            self.account = account
            self.accessGroup = accessGroup
        }

        private var baseQuery: [String: Any] {
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: self.service,
                kSecAttrAccount as String: self.account,
            ]
            if let group = self.accessGroup { query[kSecAttrAccessGroup as String] = group }
            return query
        }

        public func load() throws -> StoredKey? {
            var query = self.baseQuery
            query[kSecReturnData as String] = true
            query[kSecMatchLimit as String] = kSecMatchLimitOne
            var item: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &item)
            if status == errSecItemNotFound { return nil }
            guard status == errSecSuccess, let data = item as? Data else {
                throw KeychainError(status: status, operation: "SecItemCopyMatching")
            }
            return try? JSONDecoder().decode(StoredKey.self, from: data)
        }

        public func save(_ key: StoredKey) throws {
            let data = try JSONEncoder().encode(key)
            let update: [String: Any] = [kSecValueData as String: data]
            let status = SecItemUpdate(self.baseQuery as CFDictionary, update as CFDictionary)
            if status == errSecSuccess { return }
            guard status == errSecItemNotFound else { throw KeychainError(status: status, operation: "SecItemUpdate") }
            var item = self.baseQuery
            item[kSecValueData as String] = data
            item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            let added = SecItemAdd(item as CFDictionary, nil)
            guard added == errSecSuccess else { throw KeychainError(status: added, operation: "SecItemAdd") }
        }

        public func delete() throws {
            let status = SecItemDelete(self.baseQuery as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else {
                throw KeychainError(status: status, operation: "SecItemDelete")
            }
        }
    }
#endif
