// Placeholder; the Verification module's owner replaces it.
public struct VerificationError: Error {}
