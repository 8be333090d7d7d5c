"""Renders and checks deploy/helm/attest-gateway without helm (not installable here).

The chart's templates are restricted to a small subset of Helm's Go templates, which this file
renders faithfully; anything outside it is reported as an error, so the subset cannot drift:

  {{ PIPELINE }}   {{- … }} / {{ … -}} trim the whitespace (newlines included) on that side
  {{/* comment */}}
  {{ if COND }} … [{{ else }} …] {{ end }}   COND: VALUE, `not VALUE`, `and V V`, `or V V`
  VALUE: .Values.a.b, .Release.Name, .Release.Namespace, .Chart.Name, .Chart.Version,
         .Chart.AppVersion, a "string" or an integer
  PIPELINE: VALUE [| FUNC]…, FUNC one of quote, toYaml, sha256sum, nindent N, indent N

Truthiness is Go's: false, 0, "", nil, empty list/map are false. `toYaml` is PyYAML's block
style (helm's differs only in key order and quoting style, not meaning); `quote` of a string is
Go's %q for printable ASCII.

`check_chart` renders with values.yaml and with every optional feature switched on, parses each
rendered document, and checks: every `.Values.x` a template reads exists in values.yaml and every
values leaf is read by some template; objects and cross-references (selectors, ports, probes,
securityContext, mounts, the NetworkPolicy's targets, the checksum annotation or --watch); and
the inline policy through deploy_lint's policy checks.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

import yaml

ACTION = re.compile(r"\{\{(-?)(\s*)(.*?)(\s*)(-?)\}\}", re.S)
FUNCS = {"quote", "toYaml", "sha256sum", "nindent", "indent"}


class TemplateError(Exception):
    pass


def tokenize(text: str) -> list[tuple[str, str]]:
    """[("text", s) | ("action", body)], with {{- and -}} trimming applied."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    trim_next = False
    for m in ACTION.finditer(text):
        chunk = text[pos : m.start()]
        if trim_next:
            chunk = chunk.lstrip(" \t\r\n")
        if m.group(1) == "-":
            if not m.group(2):
                raise TemplateError(f"'{{{{-' must be followed by a space: {m.group(0)!r}")
            chunk = chunk.rstrip(" \t\r\n")
        tokens.append(("text", chunk))
        if m.group(5) == "-" and not m.group(4):
            raise TemplateError(f"'-}}}}' must follow a space: {m.group(0)!r}")
        if "{{" in m.group(3) or "}}" in m.group(3) or "}" in m.group(3).replace("*/", ""):
            raise TemplateError(f"unbalanced '{{{{' or '}}}}' near {m.group(0)[:40]!r}")
        tokens.append(("action", m.group(3)))
        trim_next = m.group(5) == "-"
        pos = m.end()
    rest = text[pos:]
    if trim_next:
        rest = rest.lstrip(" \t\r\n")
    if "{{" in rest or "}}" in rest:
        raise TemplateError("unbalanced '{{' or '}}'")
    for kind, chunk in tokens:
        if kind == "text" and ("{{" in chunk or "}}" in chunk):
            raise TemplateError("unbalanced '{{' or '}}'")
    tokens.append(("text", rest))
    return tokens


class Renderer:
    def __init__(self, values: dict, release: str = "attest-gateway", namespace: str = "default",
                 chart: dict | None = None):
        self.values = values
        self.release = {"Name": release, "Namespace": namespace}
        chart = chart or {}
        self.chart = {"Name": chart.get("name", ""), "Version": chart.get("version", ""),
                      "AppVersion": chart.get("appVersion", "")}
        self.read_paths: set[str] = set()

    def lookup(self, term: str):
        if term.startswith('"') and term.endswith('"') and len(term) >= 2:
            return json.loads(term)
        if re.fullmatch(r"-?\d+", term):
            return int(term)
        if term.startswith(".Values."):
            parts = term[len(".Values."):].split(".")
            self.read_paths.add(".".join(parts))
            node = self.values
            for p in parts:
                if not isinstance(node, dict) or p not in node:
                    raise TemplateError(f"{term} is not in values.yaml")
                node = node[p]
            return node
        m = re.fullmatch(r"\.(Release|Chart)\.(\w+)", term)
        if m:
            table = self.release if m.group(1) == "Release" else self.chart
            if m.group(2) not in table:
                raise TemplateError(f"{term} is outside the checked subset")
            return table[m.group(2)]
        raise TemplateError(f"value {term!r} is outside the checked subset")

    @staticmethod
    def truthy(v) -> bool:
        return not (v is None or v is False or v == 0 and not isinstance(v, bool) or v == "" or v == [] or v == {})

    def condition(self, expr: str) -> bool:
        words = expr.split()
        if len(words) == 1:
            return self.truthy(self.lookup(words[0]))
        if len(words) == 2 and words[0] == "not":
            return not self.truthy(self.lookup(words[1]))
        if len(words) == 3 and words[0] in ("and", "or"):
            a, b = self.truthy(self.lookup(words[1])), self.truthy(self.lookup(words[2]))
            return (a and b) if words[0] == "and" else (a or b)
        raise TemplateError(f"condition {expr!r} is outside the checked subset")

    @staticmethod
    def scalar_text(v) -> str:
        if v is None:
            return "<no value>"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (dict, list)):
            raise TemplateError("a map or list printed without toYaml")
        return str(v)

    def pipeline(self, expr: str) -> str:
        stages = [s.strip() for s in expr.split("|")]
        value = self.lookup(stages[0])
        text: str | None = None
        for stage in stages[1:]:
            words = stage.split()
            if not words or words[0] not in FUNCS:
                raise TemplateError(f"function {stage!r} is outside the checked subset")
            f = words[0]
            current = text if text is not None else value
            if f == "toYaml":
                text = yaml.safe_dump(current, default_flow_style=False, sort_keys=False).rstrip("\n")
                if text in ("{}", "[]", "null", "null\n..."):
                    text = text.split("\n")[0]
            elif f == "quote":
                text = json.dumps(self.scalar_text(current) if not isinstance(current, str) else current)
            elif f == "sha256sum":
                s = current if isinstance(current, str) else self.scalar_text(current)
                text = hashlib.sha256(s.encode()).hexdigest()
            elif f in ("nindent", "indent"):
                if len(words) != 2 or not words[1].isdigit():
                    raise TemplateError(f"{f} needs one integer: {stage!r}")
                n = int(words[1])
                s = current if isinstance(current, str) else self.scalar_text(current)
                pad = " " * n
                s = "\n".join(pad + line if line else line for line in s.split("\n"))
                text = ("\n" + s) if f == "nindent" else s
        return text if text is not None else self.scalar_text(value)

    def render(self, text: str) -> str:
        tokens = tokenize(text)
        out: list[str] = []
        # Stack of (active, branch_taken, parent_active).
        stack: list[list[bool]] = []
        active = True
        for kind, body in tokens:
            if kind == "text":
                if active:
                    out.append(body)
                continue
            body = body.strip()
            if body.startswith("/*"):
                if not body.endswith("*/"):
                    raise TemplateError(f"unterminated comment {body!r}")
                continue
            if body.startswith("if "):
                cond = self.condition(body[3:]) if active else False
                stack.append([active, cond])
                active = active and cond
            elif body == "else":
                if not stack:
                    raise TemplateError("else without if")
                parent, taken = stack[-1]
                active = parent and not taken
                stack[-1][1] = True
            elif body == "end":
                if not stack:
                    raise TemplateError("end without if")
                active = stack.pop()[0]
            else:
                first = body.split()[0] if body.split() else ""
                if first in ("range", "with", "define", "template", "include", "block", "else if"):
                    raise TemplateError(f"{first!r} is outside the checked subset")
                if active:
                    out.append(self.pipeline(body))
                else:
                    # Still check the references of untaken branches.
                    self.lookup(body.split("|")[0].strip())
        if stack:
            raise TemplateError("if without end")
        return "".join(out)


def leaf_paths(node, prefix: str = "") -> set[str]:
    if isinstance(node, dict) and node:
        paths: set[str] = set()
        for k, v in node.items():
            paths |= leaf_paths(v, f"{prefix}.{k}" if prefix else str(k))
        return paths
    return {prefix}


def render_chart(chart_dir: Path, values: dict) -> tuple[list[dict], set[str], list[str]]:
    """Renders every template: (objects, .Values paths read, problems)."""
    chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    renderer = Renderer(values, chart=chart)
    docs: list[dict] = []
    problems: list[str] = []
    for path in sorted((chart_dir / "templates").glob("*.yaml")):
        try:
            text = renderer.render(path.read_text())
        except TemplateError as e:
            problems.append(f"{path.name}: {e}")
            continue
        try:
            for doc in yaml.safe_load_all(text):
                if doc is not None:
                    doc.setdefault("__file", path.name)
                    docs.append(doc)
        except yaml.YAMLError as e:
            problems.append(f"{path.name}: rendered YAML does not parse: {e}")
    notes = chart_dir / "templates" / "NOTES.txt"
    if not notes.exists():
        problems.append("templates/NOTES.txt is missing")
    else:
        # Text, not YAML: it only has to render within the subset and leave no action behind.
        try:
            text = renderer.render(notes.read_text())
            if "{{" in text or "}}" in text:
                problems.append("NOTES.txt: an action survived rendering")
        except TemplateError as e:
            problems.append(f"NOTES.txt: {e}")
    return docs, renderer.read_paths, problems


def all_features_on(values: dict) -> dict:
    v = copy.deepcopy(values)
    v["hpa"]["enabled"] = True
    v["pdb"]["enabled"] = True
    v["serviceMonitor"]["enabled"] = True
    v["serviceMonitor"]["labels"] = {"release": "prometheus"}
    v["networkPolicy"]["enabled"] = True
    v["networkPolicy"]["redis"]["externalPeers"] = [{"ipBlock": {"cidr": "10.20.0.0/16"}}]
    v["redisSecret"]["create"] = True
    v["redisSecret"]["password"] = "not-a-real-password"
    v["tls"]["enabled"] = True
    v["watchConfig"] = not values.get("watchConfig", False)
    return v


def check_rendered(docs: list[dict], values: dict, check_policy_text) -> list[str]:
    problems: list[str] = []
    by_kind: dict[str, list[dict]] = {}
    for d in docs:
        by_kind.setdefault(d.get("kind", "?"), []).append(d)
        if not d.get("apiVersion") or not d.get("metadata", {}).get("name"):
            problems.append(f"{d.get('__file')}: object without apiVersion or metadata.name")
    deployments = by_kind.get("Deployment", [])
    if len(deployments) != 1:
        return problems + [f"expected one Deployment; rendered {len(deployments)}"]
    dep = deployments[0]
    pod = dep["spec"]["template"]
    pod_labels = pod["metadata"].get("labels", {})
    if dep["spec"]["selector"]["matchLabels"] != pod_labels:
        problems.append("Deployment selector does not match the pod labels")
    spec = pod["spec"]
    c = spec["containers"][0]
    sc = c.get("securityContext", {})
    psc = spec.get("securityContext", {})
    if not (psc.get("runAsNonRoot") and sc.get("readOnlyRootFilesystem") and sc.get("allowPrivilegeEscalation") is False):
        problems.append("gateway container: runAsNonRoot, readOnlyRootFilesystem, allowPrivilegeEscalation: false required")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = c.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") != "admin":
            problems.append(f"{probe} must GET {path} on the admin port")
    if not c.get("resources", {}).get("requests"):
        problems.append("gateway container has no resource requests")
    watch = "--watch" in c.get("args", [])
    checksum = pod["metadata"].get("annotations", {}).get("checksum/policy")
    if watch != bool(values["watchConfig"]):
        problems.append("watchConfig and the container's --watch disagree")
    if not watch:
        want = hashlib.sha256(values["policy"].encode()).hexdigest()
        if checksum != want:
            problems.append("without --watch the pod template needs checksum/policy = sha256 of the policy")
    # The policy: parses, its ports are the container's.
    cms = [d for d in by_kind.get("ConfigMap", []) if "policies.yaml" in d.get("data", {})]
    if len(cms) != 1:
        problems.append("expected one ConfigMap with policies.yaml")
    else:
        text = cms[0]["data"]["policies.yaml"]
        if text != values["policy"] and text.rstrip("\n") != values["policy"].rstrip("\n"):
            problems.append("the ConfigMap's policies.yaml is not values.policy verbatim")
        policy, errs = check_policy_text(text, "helm values.policy")
        problems += errs
        if policy:
            for key, port_name in (("listen", "proxy"), ("admin_listen", "admin")):
                listen = policy.get(key)
                if isinstance(listen, str) and not listen.endswith(f":{ports.get(port_name)}"):
                    problems.append(f"policy {key} {listen} is not the container's {port_name} port {ports.get(port_name)}")
            if policy.get("redis_password_file") != "/run/secrets/redis/password":
                problems.append("policy redis_password_file must be /run/secrets/redis/password (the Secret mount)")
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        if vols.get("policy", {}).get("configMap", {}).get("name") != cms[0]["metadata"]["name"]:
            problems.append("the policy volume does not mount the chart's ConfigMap")
        mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
        if any("subPath" in m for m in mounts.values()):
            problems.append("subPath mounts never see ConfigMap/Secret updates: mount directories")
        if vols.get("redis-password", {}).get("secret", {}).get("secretName") != values["redisSecret"]["name"]:
            problems.append("redis-password volume does not mount values.redisSecret.name")
        if values["tls"]["enabled"] and vols.get("tls", {}).get("secret", {}).get("secretName") != values["tls"]["secretName"]:
            problems.append("tls.enabled but the TLS Secret is not mounted")
    # Optional objects follow their switches.
    for kind, switch in (("HorizontalPodAutoscaler", "hpa"), ("PodDisruptionBudget", "pdb"),
                         ("ServiceMonitor", "serviceMonitor")):
        if bool(by_kind.get(kind)) != bool(values[switch]["enabled"]):
            problems.append(f"{kind} rendered={bool(by_kind.get(kind))} but {switch}.enabled={values[switch]['enabled']}")
    if values["hpa"]["enabled"] and "replicas" in dep["spec"]:
        problems.append("with the HPA on, the Deployment must not set replicas (every upgrade would reset the scale)")
    for pdb in by_kind.get("PodDisruptionBudget", []):
        if pdb["spec"]["selector"]["matchLabels"] != pod_labels:
            problems.append("PDB selector does not match the pod labels")
    for sm in by_kind.get("ServiceMonitor", []):
        if sm.get("apiVersion") != "monitoring.coreos.com/v1":
            problems.append("ServiceMonitor must be monitoring.coreos.com/v1")
        svc_ports = {p["name"] for s in by_kind.get("Service", []) for p in s["spec"]["ports"]}
        for ep in sm["spec"]["endpoints"]:
            if ep.get("port") not in svc_ports or ep.get("path") != "/metrics":
                problems.append("ServiceMonitor must scrape /metrics on a named Service port (admin)")
    for svc in by_kind.get("Service", []):
        if svc["spec"]["selector"] != pod_labels:
            problems.append("Service selector does not match the pod labels")
        for p in svc["spec"]["ports"]:
            if p["targetPort"] not in ports:
                problems.append(f"Service targetPort {p['targetPort']} is not a container port name")
    if by_kind.get("Secret") and not values["redisSecret"]["create"]:
        problems.append("a Secret rendered with redisSecret.create false")
    nps = by_kind.get("NetworkPolicy", [])
    if bool(nps) != bool(values["networkPolicy"]["enabled"]):
        problems.append("NetworkPolicy rendered does not follow networkPolicy.enabled")
    if nps:
        up_labels = values["networkPolicy"]["upstream"]["podLabels"]
        upstream = [n for n in nps if n["spec"]["podSelector"].get("matchLabels") == up_labels]
        if len(upstream) != 1:
            problems.append("no NetworkPolicy selects the upstream pods")
        else:
            rules = upstream[0]["spec"].get("ingress", [])
            sources = [f for r in rules for f in r.get("from", [])]
            if "Ingress" not in upstream[0]["spec"].get("policyTypes", []) or not rules or any(
                f.get("podSelector", {}).get("matchLabels") != pod_labels or "namespaceSelector" in f for f in sources
            ) or any(not r.get("from") for r in rules):
                problems.append("the upstream NetworkPolicy must admit only the gateway pods")
        gw = [n for n in nps if n["spec"]["podSelector"].get("matchLabels") == pod_labels]
        if len(gw) != 1:
            problems.append("no NetworkPolicy selects the gateway pods")
        else:
            egress_to = [t.get("podSelector", {}).get("matchLabels") for r in gw[0]["spec"].get("egress", []) for t in r.get("to", [])]
            if values["networkPolicy"]["redis"]["podLabels"] not in egress_to:
                problems.append("the gateway NetworkPolicy does not let the gateway reach Redis")
            peers = [t for r in gw[0]["spec"].get("egress", []) for t in r.get("to", [])]
            for peer in values["networkPolicy"]["redis"].get("externalPeers") or []:
                if peer not in peers:
                    problems.append(f"the gateway NetworkPolicy does not let the gateway reach Redis at {peer}")
            if up_labels not in egress_to:
                problems.append("the gateway NetworkPolicy does not let the gateway reach the upstream")
    return problems


def check_chart(chart_dir: Path, check_policy_text, values_override: dict | None = None) -> list[str]:
    problems: list[str] = []
    try:
        chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
        values = values_override if values_override is not None else yaml.safe_load((chart_dir / "values.yaml").read_text())
    except (OSError, yaml.YAMLError) as e:
        return [f"helm chart: {e}"]
    if chart.get("apiVersion") != "v2" or not chart.get("name") or not chart.get("version"):
        problems.append("Chart.yaml: apiVersion v2, name and version required")
    read: set[str] = set()
    for label, v in (("defaults", values), ("all features on", all_features_on(values))):
        try:
            docs, paths, errs = render_chart(chart_dir, v)
        except (KeyError, TypeError) as e:
            problems.append(f"helm ({label}): values missing {e}")
            continue
        read |= paths
        problems += [f"helm ({label}): {e}" for e in errs]
        if not errs:
            problems += [f"helm ({label}): {e}" for e in check_rendered(docs, v, check_policy_text)]
    leaves = leaf_paths(values)
    unused = sorted(p for p in leaves if not any(p == r or p.startswith(r + ".") for r in read))
    problems += [f"helm: values.yaml key {p} is not used by any template" for p in unused]
    return problems
