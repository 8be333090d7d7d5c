/// The standard OpenTelemetry environment variables for the trace exporter
/// (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/).
///
/// Precedence (docs/operations.md "Traces"): a key set in `tracing:` wins over its variable;
/// a variable fills a key the file leaves out; `OTEL_SDK_DISABLED=true` turns tracing off
/// whatever the file says. `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is the URL as is;
/// `OTEL_EXPORTER_OTLP_ENDPOINT` a base URL to which `/v1/traces` is appended.
extension TracingPolicy {
    /// Names of the variables read (`attest-gateway check-config` and the docs list them).
    public static let environmentVariables = [
        "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
    ]

    /// This policy completed from `environment`; a malformed variable is a `PolicyError` naming
    /// it (file `environment`, the variable as the field; its value is never quoted: headers
    /// carry credentials).
    public func resolved(environment: [String: String]) throws(PolicyError) -> TracingPolicy {
        var policy = self
        func value(_ name: String) -> String? {
            guard let text = environment[name]?.trimmingASCIISpaces, !text.isEmpty else { return nil }
            return text
        }
        if let disabled = value("OTEL_SDK_DISABLED") {
            switch disabled.lowercased() {
            case "true": policy.enabled = false
            case "false": break
            default: throw Self.environmentError(.invalidValue, "OTEL_SDK_DISABLED", "expected true or false")
            }
        }
        if policy.endpoint == nil {
            if let url = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
                guard let endpoint = Endpoint.parse(url) else {
                    throw Self.environmentError(
                        .invalidValue, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "expected an http:// or https:// URL")
                }
                policy.endpoint = endpoint
            } else if let url = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
                guard let endpoint = Endpoint.parse(url, appendingTracesPath: true) else {
                    throw Self.environmentError(
                        .invalidValue, "OTEL_EXPORTER_OTLP_ENDPOINT", "expected an http:// or https:// URL")
                }
                policy.endpoint = endpoint
            }
        }
        for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
            guard let list = value(name) else { continue }
            guard let pairs = Self.keyValueList(list) else {
                throw Self.environmentError(.invalidValue, name, "expected name=value pairs separated by commas")
            }
            for (headerName, headerValue) in pairs {
                guard Self.isValidHeader(name: headerName, value: headerValue) else {
                    throw Self.environmentError(.invalidValue, name, "header \(headerName) is not a valid field")
                }
                if !policy.headers.contains(where: { $0.name.lowercased() == headerName.lowercased() }) {
                    policy.headers.append(Header(name: headerName, value: headerValue))
                }
            }
        }
        if let list = value("OTEL_RESOURCE_ATTRIBUTES") {
            guard let pairs = Self.keyValueList(list) else {
                throw Self.environmentError(
                    .invalidValue, "OTEL_RESOURCE_ATTRIBUTES", "expected key=value pairs separated by commas")
            }
            for (key, attributeValue) in pairs {
                if key == "service.name" {
                    if policy.serviceName == nil && value("OTEL_SERVICE_NAME") == nil {
                        policy.serviceName = attributeValue
                    }
                } else if !policy.resourceAttributes.contains(where: { $0.key == key }) {
                    policy.resourceAttributes.append(Attribute(key: key, value: attributeValue))
                }
            }
        }
        if policy.serviceName == nil, let name = value("OTEL_SERVICE_NAME") { policy.serviceName = name }
        if policy.sampleRatio == nil {
            let argument = value("OTEL_TRACES_SAMPLER_ARG")
            switch value("OTEL_TRACES_SAMPLER") {
            case nil:
                // The argument alone, as parentbased_traceidratio's.
                if let argument { policy.sampleRatio = try Self.ratioArgument(argument) }
            case "parentbased_traceidratio", "traceidratio":
                policy.sampleRatio =
                    try argument.map { (text) throws(PolicyError) in try Self.ratioArgument(text) } ?? 1
            case "parentbased_always_on", "always_on":
                policy.sampleRatio = 1
            case "parentbased_always_off", "always_off":
                policy.sampleRatio = 0
            default:
                throw Self.environmentError(
                    .invalidValue, "OTEL_TRACES_SAMPLER",
                    "expected parentbased_traceidratio, parentbased_always_on or parentbased_always_off (the sampler is always parent-based)"
                )
            }
        }
        return policy
    }

    private static func ratioArgument(_ text: String) throws(PolicyError) -> Double {
        guard let ratio = Double(text), ratio.isFinite, (0...1).contains(ratio) else {
            throw Self.environmentError(.outOfRange, "OTEL_TRACES_SAMPLER_ARG", "expected a number from 0 to 1")
        }
        return ratio
    }

    /// `k1=v1,k2=v2` (W3C Baggage-style, values percent-decoded); nil when malformed. At most 64 pairs.
    static func keyValueList(_ text: String) -> [(String, String)]? {
        var pairs: [(String, String)] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: true) {
            guard let equals = item.firstIndex(of: "=") else { return nil }
            let key = String(item[..<equals]).trimmingASCIISpaces
            guard !key.isEmpty, let value = Self.percentDecoded(String(item[item.index(after: equals)...])) else {
                return nil
            }
            pairs.append((key, value.trimmingASCIISpaces))
        }
        return pairs.count <= 64 ? pairs : nil
    }

    private static func percentDecoded(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            else { return nil }
            bytes.append(value)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func environmentError(_ code: PolicyError.Code, _ variable: String, _ message: String) -> PolicyError
    {
        PolicyError(code: code, file: "environment", line: 0, column: 0, field: variable, message: message)
    }
}

extension String {
    fileprivate var trimmingASCIISpaces: String {
        var view = Substring(self)
        while view.first == " " || view.first == "\t" { view = view.dropFirst() }
        while view.last == " " || view.last == "\t" { view = view.dropLast() }
        return String(view)
    }
}
