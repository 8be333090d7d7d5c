import Verification

/// SHA-1, only to name Lua scripts for `EVALSHA` before the server has answered
/// `SCRIPT LOAD` (Redis names a script by the SHA-1 of its text). Not used for security.
enum SHA1 {
    static func hexDigest(_ text: String) -> String {
        Insecure.SHA1.hash(Array(text.utf8)).hexString
    }
}
