/// The app's `KeyStore`, with its failures as `AttestedClientError.keyStorage`: the store is
/// the app's (the Keychain in production), so its errors are reported, never retried.
struct KeyStorage: Sendable {
    let store: any KeyStore

    func load() throws(AttestedClientError) -> StoredKey? {
        do {
            return try self.store.load()
        } catch {
            throw AttestedClientError(.keyStorage, "could not read the key ID", underlying: error)
        }
    }

    func save(_ key: StoredKey) throws(AttestedClientError) {
        do {
            try self.store.save(key)
        } catch {
            throw AttestedClientError(.keyStorage, "could not save the key ID", underlying: error)
        }
    }

    func delete() throws(AttestedClientError) {
        do {
            try self.store.delete()
        } catch {
            throw AttestedClientError(.keyStorage, "could not delete the key ID", underlying: error)
        }
    }

    /// Deletes `keyID` if it is still the stored key: parallel requests that saw the same
    /// `unknown_key` discard it once, and the others then join the new enrollment.
    func discard(_ keyID: String) throws(AttestedClientError) {
        guard let stored = try self.load(), stored.keyID == keyID else { return }
        try self.delete()
    }
}
