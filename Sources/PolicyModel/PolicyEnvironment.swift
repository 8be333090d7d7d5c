import Foundation

/// `${NAME}` substitution in policy scalars, the way platforms hand out configuration
/// (Kubernetes `env:` from Secrets, compose `environment:`, systemd `Environment=`).
///
/// Applied by `YAMLReader` to every scalar *value* (never to mapping keys), on the text as
/// libyaml unescaped it and *before* the YAML core schema types it: `port: ${PORT}` with
/// `PORT=8080` is the integer 8080, `"${PORT}"` the string "8080". Line and column are those of
/// the scalar in the file, so errors stay precise.
///
/// Syntax: `${NAME}` with `NAME` = `[A-Za-z_][A-Za-z0-9_]*`; `$${` is a literal `${`; any other
/// `$` is literal (`$HOME`, `a$b`, a lone `$`). There is no default (`${A:-b}`) syntax: an
/// unset variable is an error, so a missing Secret is found at load, not at the first request.
/// A variable set to the empty string substitutes as empty.
///
/// Values are never logged nor quoted in a message: errors name the variable only, and
/// `PolicyLoader` replaces any substituted value of `redactionMinimumLength` or more
/// characters found in an error or warning message by its `${NAME}`.
package struct PolicyEnvironment: Sendable {
    /// Values shorter than this are not redacted from messages (they would match ordinary words
    /// like `off`; secrets are longer).
    package static let redactionMinimumLength = 6

    package var variables: [String: String]

    package init(_ variables: [String: String]) {
        self.variables = variables
    }

    /// The process environment, read once per load.
    package static var process: PolicyEnvironment {
        PolicyEnvironment(ProcessInfo.processInfo.environment)
    }

    /// Why a scalar could not be substituted; `offset` is the index, in Unicode scalars, of the
    /// `$` that starts the reference.
    package struct Failure: Error, Hashable, Sendable {
        package enum Kind: Hashable, Sendable {
            /// `${NAME}` with `NAME` not in the environment.
            case unset(name: String)
            /// `${` without a closing `}` or with a name outside `[A-Za-z_][A-Za-z0-9_]*`.
            case malformed
        }
        package var kind: Kind
        package var offset: Int
    }

    /// One substitution made, for redaction.
    package struct Substitution: Hashable, Sendable {
        package var name: String
        package var value: String
    }

    /// `text` with each `${NAME}` replaced; `substitutions` gets one entry per reference.
    /// Text without `$` is returned as is.
    package func substitute(
        _ text: String,
        substitutions: inout [Substitution]
    ) -> Result<String, Failure> {
        guard text.utf8.contains(UInt8(ascii: "$")) else { return .success(text) }
        let scalars = Array(text.unicodeScalars)
        var out = String.UnicodeScalarView()
        var i = 0
        while i < scalars.count {
            let c = scalars[i]
            guard c == "$" else {
                out.append(c)
                i += 1
                continue
            }
            // `$${` → literal `${`.
            if i + 2 < scalars.count, scalars[i + 1] == "$", scalars[i + 2] == "{" {
                out.append("$")
                out.append("{")
                i += 3
                continue
            }
            guard i + 1 < scalars.count, scalars[i + 1] == "{" else {
                out.append(c)
                i += 1
                continue
            }
            var j = i + 2
            var name = String.UnicodeScalarView()
            while j < scalars.count, scalars[j] != "}" {
                name.append(scalars[j])
                j += 1
            }
            let nameText = String(name)
            guard j < scalars.count, Self.isValidName(nameText) else {
                return .failure(Failure(kind: .malformed, offset: i))
            }
            guard let value = self.variables[nameText] else {
                return .failure(Failure(kind: .unset(name: nameText), offset: i))
            }
            substitutions.append(Substitution(name: nameText, value: value))
            out.append(contentsOf: value.unicodeScalars)
            i = j + 1
        }
        return .success(String(out))
    }

    /// `[A-Za-z_][A-Za-z0-9_]*`
    package static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first.isASCII, first == "_" || first.properties.isAlphabetic
        else { return false }
        return name.unicodeScalars.allSatisfy {
            $0.isASCII && ($0 == "_" || $0.properties.isAlphabetic || ("0"..."9").contains($0))
        }
    }

    /// `message` with every substituted value long enough to be a secret replaced by `${NAME}`.
    package static func redact(_ message: String, _ substitutions: [Substitution]) -> String {
        var text = message
        for substitution in substitutions.sorted(by: { $0.value.count > $1.value.count })
        where substitution.value.count >= Self.redactionMinimumLength {
            text = text.replacingOccurrences(of: substitution.value, with: "${\(substitution.name)}")
        }
        return text
    }
}
