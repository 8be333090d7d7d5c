/// Why a policy file was refused: where (file, line, column, field path) and what was
/// expected versus found.
///
/// `description` is what operators see, one line:
/// `policies.yaml:14:11: routes[0].mode: expected one of enforce, monitor, off; found "enfroce"`.
/// Line and column are 1-based; 0 means the error concerns the whole file. `field` is the
/// path of the offending key (`routes[0].match.path_prefix`, `upstreams.api.url`), empty for
/// syntax errors. Equality compares `code` only (tests match on the code).
public struct PolicyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable, snake_case error code (see `description`); new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case fileUnreadable = "file_unreadable"
            case fileTooLarge = "file_too_large"
            case notUTF8 = "not_utf8"
            case syntax
            case tooDeep = "too_deep"
            case tooManyNodes = "too_many_nodes"
            case anchorNotAllowed = "anchor_not_allowed"
            case aliasNotAllowed = "alias_not_allowed"
            case tagNotAllowed = "tag_not_allowed"
            case multipleDocuments = "multiple_documents"
            case emptyDocument = "empty_document"
            case nonScalarKey = "non_scalar_key"
            case duplicateKey = "duplicate_key"
            case unknownKey = "unknown_key"
            case missingKey = "missing_key"
            case conflictingKeys = "conflicting_keys"
            case wrongType = "wrong_type"
            case invalidValue = "invalid_value"
            case outOfRange = "out_of_range"
            case invalidDuration = "invalid_duration"
            case invalidSize = "invalid_size"
            case invalidListenAddress = "invalid_listen_address"
            case addressConflict = "address_conflict"
            case invalidRedisURL = "invalid_redis_url"
            case invalidAppID = "invalid_app_id"
            case emptyAppIDs = "empty_app_ids"
            case duplicateAppID = "duplicate_app_id"
            case appIDsRequired = "app_ids_required"
            case invalidUpstreamURL = "invalid_upstream_url"
            case invalidName = "invalid_name"
            case unknownUpstream = "unknown_upstream"
            case invalidPath = "invalid_path"
            case invalidMethod = "invalid_method"
            case endpointCollision = "endpoint_collision"
            case duplicateRouteName = "duplicate_route_name"
            case trustRootUnreadable = "trust_root_unreadable"
            case trustRootNotCertificate = "trust_root_not_certificate"
            case secretUnavailable = "secret_unavailable"
            case tlsFileUnreadable = "tls_file_unreadable"
            case duplicateServerName = "duplicate_server_name"
            case undefinedVariable = "undefined_variable"
            case invalidSubstitution = "invalid_substitution"
            case signingKeyInvalid = "signing_key_invalid"
            case unknownSigningKey = "unknown_signing_key"
        }

        fileprivate let base: Base
        fileprivate init(_ base: Base) { self.base = base }

        public var description: String { self.base.rawValue }

        /// The file cannot be opened or read.
        public static let fileUnreadable = Code(.fileUnreadable)
        /// The file is larger than `PolicyLoader.maximumFileBytes`.
        public static let fileTooLarge = Code(.fileTooLarge)
        public static let notUTF8 = Code(.notUTF8)
        /// libyaml refused the text (its own message and position).
        public static let syntax = Code(.syntax)
        /// Nesting deeper than `YAMLReader.maximumDepth`.
        public static let tooDeep = Code(.tooDeep)
        public static let tooManyNodes = Code(.tooManyNodes)
        /// `&anchor` / `*alias`: refused (no alias expansion, so no "billion laughs").
        public static let anchorNotAllowed = Code(.anchorNotAllowed)
        public static let aliasNotAllowed = Code(.aliasNotAllowed)
        /// Explicit tags other than `!!str`.
        public static let tagNotAllowed = Code(.tagNotAllowed)
        public static let multipleDocuments = Code(.multipleDocuments)
        public static let emptyDocument = Code(.emptyDocument)
        public static let nonScalarKey = Code(.nonScalarKey)
        public static let duplicateKey = Code(.duplicateKey)
        /// A key the schema does not know (the message suggests the nearest valid one).
        public static let unknownKey = Code(.unknownKey)
        public static let missingKey = Code(.missingKey)
        /// Keys that exclude each other (`redis` and `store`, `path` and `path_prefix`).
        public static let conflictingKeys = Code(.conflictingKeys)
        /// A value of the wrong YAML type (a number where a string is expected, ...).
        public static let wrongType = Code(.wrongType)
        /// A value outside an enumeration (`mode: enfroce`).
        public static let invalidValue = Code(.invalidValue)
        public static let outOfRange = Code(.outOfRange)
        public static let invalidDuration = Code(.invalidDuration)
        public static let invalidSize = Code(.invalidSize)
        public static let invalidListenAddress = Code(.invalidListenAddress)
        /// Two listeners on the same address.
        public static let addressConflict = Code(.addressConflict)
        public static let invalidRedisURL = Code(.invalidRedisURL)
        public static let invalidAppID = Code(.invalidAppID)
        public static let emptyAppIDs = Code(.emptyAppIDs)
        public static let duplicateAppID = Code(.duplicateAppID)
        /// An `enforce` or `monitor` route without any `app_ids`.
        public static let appIDsRequired = Code(.appIDsRequired)
        public static let invalidUpstreamURL = Code(.invalidUpstreamURL)
        public static let invalidName = Code(.invalidName)
        /// A route names an upstream that `upstreams` does not define.
        public static let unknownUpstream = Code(.unknownUpstream)
        public static let invalidPath = Code(.invalidPath)
        public static let invalidMethod = Code(.invalidMethod)
        public static let endpointCollision = Code(.endpointCollision)
        public static let duplicateRouteName = Code(.duplicateRouteName)
        public static let trustRootUnreadable = Code(.trustRootUnreadable)
        public static let trustRootNotCertificate = Code(.trustRootNotCertificate)
        /// `redis_password_file` cannot be read or is empty, or `redis_password_env` is unset.
        public static let secretUnavailable = Code(.secretUnavailable)
        /// A file named by a `tls:` block or an upstream's TLS keys is missing, not a regular
        /// file, unreadable, or (session ticket keys) of the wrong size.
        public static let tlsFileUnreadable = Code(.tlsFileUnreadable)
        /// A server name listed twice across a listener's `tls.sni` entries.
        public static let duplicateServerName = Code(.duplicateServerName)
        /// `${NAME}` in a scalar with `NAME` not in the environment (the message names the
        /// variable, never a value).
        public static let undefinedVariable = Code(.undefinedVariable)
        /// `${` not followed by a valid name and `}` (write `$${` for a literal `${`).
        public static let invalidSubstitution = Code(.invalidSubstitution)
        /// An `identity_signature.keys[i].key_file` is missing, unreadable, too short (HMAC) or not
        /// a PKCS#8 P-256 private key (ES256).
        public static let signingKeyInvalid = Code(.signingKeyInvalid)
        /// `identity_signature.active_kid` names no listed key.
        public static let unknownSigningKey = Code(.unknownSigningKey)
    }

    public var code: Code
    /// The policy file as it was named to the loader.
    public var file: String
    /// 1-based; 0 when the error is about the whole file.
    public var line: Int
    /// 1-based; 0 when the error is about the whole file.
    public var column: Int
    /// Path of the offending field, e.g. `routes[0].mode`; empty when none applies.
    public var field: String
    /// What was expected and what was found.
    public var message: String

    public init(code: Code, file: String, line: Int, column: Int, field: String, message: String) {
        self.code = code
        self.file = file
        self.line = line
        self.column = column
        self.field = field
        self.message = message
    }

    /// `file:line:column: field: message` (position and field left out when unknown).
    public var description: String {
        policyDiagnostic(
            file: self.file, line: self.line, column: self.column, field: self.field, message: self.message)
    }

    public static func == (lhs: PolicyError, rhs: PolicyError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }
}

/// Something legal but probably not what the operator meant (a route that can never match,
/// extra trust roots, ...). `check-config` prints them; `serve` logs them.
public struct PolicyWarning: Hashable, Sendable, CustomStringConvertible {
    /// Stable snake_case code: `unreachable_route`, `development_trust_roots`, `memory_store`,
    /// `store_error_allows`, `setting_without_effect`, `no_routes`, `body_exceeds_budget`,
    /// `body_deadline_tight`, `proxy_protocol_without_trusted_proxies`,
    /// `case_sensitive_route_shadowed`, `websocket_challenge_in_body`, `debug_tokens_in_production`,
    /// `token_issuer_not_https`, `token_skips_route_checks`, `http2_small_window`.
    public var code: String
    public var file: String
    public var line: Int
    public var column: Int
    public var field: String
    public var message: String

    public init(code: String, file: String, line: Int, column: Int, field: String, message: String) {
        self.code = code
        self.file = file
        self.line = line
        self.column = column
        self.field = field
        self.message = message
    }

    /// `file:line:column: field: message`.
    public var description: String {
        policyDiagnostic(
            file: self.file, line: self.line, column: self.column, field: self.field, message: self.message)
    }
}

/// `file:line:column: field: message`, the shape of every policy error and warning (position
/// left out when the line is unknown, field when empty).
func policyDiagnostic(file: String, line: Int, column: Int, field: String, message: String) -> String {
    var text = file
    if line > 0 { text += ":\(line):\(column)" }
    text += ": "
    if !field.isEmpty { text += field + ": " }
    return text + message
}
