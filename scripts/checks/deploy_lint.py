#!/usr/bin/env python3
"""Structural checks of deploy/: Kubernetes manifests, the Dockerfile, the systemd unit, redis.conf,
the Helm chart (rendered by helm_render.py: helm is not installable here) and docker-compose.yml.

Run by scripts/checks/deploy-lint.sh (which adds `systemd-analyze verify` and a throwaway
redis-server on deploy/redis.conf). Every check appends a problem string; the exit status is 1 when
any problem was found. `--self-test` breaks copies of the real files one way at a time and fails
unless each broken copy is caught, so the checker itself cannot silently pass everything.

Needs PyYAML for the manifests (Debian: python3-yaml, installed by `make deps`). Without it the
YAML checks are reported as SKIPPED and the rest still runs.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path

try:
    import yaml  # type: ignore
except ImportError:  # pragma: no cover - depends on the machine
    yaml = None

sys.path.insert(0, str(Path(__file__).resolve().parent))
if yaml is not None:
    import helm_render  # noqa: E402  (needs PyYAML)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
TLS_OVERLAY = DEPLOY / "kubernetes-tls"  # kustomize overlay of deploy/kubernetes: TLS at the pods
HELM_CHART = DEPLOY / "helm" / "attest-gateway"  # rendered by helm_render.py (helm is not installable here)
COMPOSE = ROOT / "docker-compose.yml"

# Runtime libraries the image may install: exactly what the binary links, plus CA certificates.
RUNTIME_PACKAGES = {"libssl3", "libhiredis0.14", "libyaml-0-2", "ca-certificates"}
BUILD_IMAGE = "swift:6.3-bookworm"
RUNTIME_IMAGE = "debian:bookworm-slim"
DEFAULT_DRAIN_SECONDS = 20  # GatewayLimits.shutdownDrainTimeout


# ---------------------------------------------------------------------------------------------
# helpers


def parse_duration(text: str) -> float | None:
    """`20s`, `500ms`, `2m`, `1h` or a bare number of seconds (policies.yaml and systemd forms)."""
    text = str(text).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)?", text)
    if not m:
        return None
    value = float(m.group(1))
    unit = m.group(2) or "s"
    return value * {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[unit]


def parse_listen(text: str) -> tuple[str, int] | None:
    m = re.fullmatch(r"\[?([0-9A-Za-z.:]*?)\]?:(\d+)", str(text).strip())
    if not m:
        return None
    return m.group(1), int(m.group(2))


def container_port(container: dict, ref) -> int | None:
    """Resolves a probe/Service port reference (a number or a port name) against a container."""
    if isinstance(ref, int):
        return ref
    for port in container.get("ports") or []:
        if port.get("name") == ref:
            return port.get("containerPort")
    if isinstance(ref, str) and ref.isdigit():
        return int(ref)
    return None


# ---------------------------------------------------------------------------------------------
# Kubernetes


def load_manifests(directory: Path) -> tuple[list[dict], list[str]]:
    docs, problems = [], []
    files = sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml"))
    if not files:
        problems.append(f"{directory}: no manifests found")
    for path in files:
        try:
            for doc in yaml.safe_load_all(path.read_text()):
                if doc is None:
                    continue
                if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
                    problems.append(f"{path.name}: document without kind/apiVersion")
                    continue
                doc["__file__"] = path.name
                docs.append(doc)
        except yaml.YAMLError as error:
            problems.append(f"{path.name}: YAML does not parse: {error}")
    return docs, problems


def check_policy_text(text: str, where: str) -> tuple[dict | None, list[str]]:
    """The policy embedded in the ConfigMap: parsed as strings (BaseLoader), like libyaml does."""
    problems = []
    try:
        policy = yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as error:
        return None, [f"{where}: policies.yaml does not parse: {error}"]
    if not isinstance(policy, dict):
        return None, [f"{where}: policies.yaml is not a mapping"]
    for key in ("listen", "admin_listen", "app_ids", "upstreams", "routes"):
        if key not in policy:
            problems.append(f"{where}: policies.yaml has no `{key}`")
    if "redis" not in policy and policy.get("store") != "memory":
        problems.append(f"{where}: policies.yaml names no store (`redis:` URL)")
    if policy.get("store") == "memory":
        problems.append(f"{where}: `store: memory` is single-node only; replicas need `redis:`")
    if policy.get("trust_roots"):
        problems.append(f"{where}: trust_roots set in a production manifest (development CAs only)")
    if policy.get("environment") not in (None, "production"):
        problems.append(f"{where}: environment is {policy.get('environment')!r}, expected production")
    redis_url = str(policy.get("redis", ""))
    if re.match(r"redis://[^@/]*:[^@/]+@", redis_url) and "${" not in redis_url:
        problems.append(f"{where}: the Redis password is written in the ConfigMap; use the Secret")
    return policy, problems


def check_kubernetes(docs: list[dict]) -> list[str]:
    problems: list[str] = []
    by_kind: dict[str, list[dict]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    for kind in ("Deployment", "Service", "PodDisruptionBudget", "ConfigMap"):
        if kind not in by_kind:
            problems.append(f"kubernetes: no {kind}")
    if problems:
        return problems

    deployment = by_kind["Deployment"][0]
    where = f"{deployment['__file__']} Deployment/{deployment['metadata'].get('name')}"
    spec = deployment.get("spec", {})
    template = spec.get("template", {})
    pod_labels = template.get("metadata", {}).get("labels", {}) or {}
    pod = template.get("spec", {})
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    if not selector or any(pod_labels.get(k) != v for k, v in selector.items()):
        problems.append(f"{where}: selector.matchLabels does not match the pod labels")
    if int(spec.get("replicas", 1)) < 2:
        problems.append(f"{where}: fewer than 2 replicas (no availability during rollouts)")

    pod_sc = pod.get("securityContext") or {}
    containers = pod.get("containers") or []
    if not containers:
        return problems + [f"{where}: no containers"]
    gateway = containers[0]
    cname = f"{where} container {gateway.get('name')}"

    image = str(gateway.get("image", ""))
    if not image:
        problems.append(f"{cname}: no image")
    elif image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]:
        problems.append(f"{cname}: image {image!r} is not pinned to a tag or digest")

    sc = gateway.get("securityContext") or {}
    run_as_non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
    if run_as_non_root is not True:
        problems.append(f"{cname}: securityContext.runAsNonRoot is not true")
    uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
    if uid is not None and int(uid) == 0:
        problems.append(f"{cname}: runAsUser is 0 (root)")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{cname}: securityContext.readOnlyRootFilesystem is not true")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{cname}: securityContext.allowPrivilegeEscalation is not false")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        problems.append(f"{cname}: capabilities.drop does not contain ALL")
    if sc.get("privileged"):
        problems.append(f"{cname}: privileged")

    resources = gateway.get("resources") or {}
    if not (resources.get("requests") or {}).get("cpu") or not (resources.get("requests") or {}).get("memory"):
        problems.append(f"{cname}: resources.requests needs cpu and memory")
    if not (resources.get("limits") or {}).get("memory"):
        problems.append(f"{cname}: resources.limits.memory missing")

    # The policy this pod serves: the file at the --config path comes from a ConfigMap, either
    # mounted directly or rendered into a shared volume by an init container (which fills in the
    # Redis password from a Secret).
    args = [str(a) for a in (gateway.get("args") or []) + (gateway.get("command") or [])]
    config_path = None
    for i, arg in enumerate(args):
        if arg == "--config" and i + 1 < len(args):
            config_path = args[i + 1]
        elif arg.startswith("--config="):
            config_path = arg.split("=", 1)[1]
    if config_path is None:
        config_path = "/etc/attest-gateway/policies.yaml"  # the image's CMD
    policy = None
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    init_containers = pod.get("initContainers") or []
    config_maps = {cm["metadata"].get("name"): cm for cm in by_kind["ConfigMap"]}

    def config_map_policy(volume: dict, file_name: str) -> str | None:
        cm_ref = (volume.get("configMap") or {}).get("name")
        cm = config_maps.get(cm_ref)
        if cm is None:
            problems.append(f"{where}: volume {volume.get('name')} names ConfigMap {cm_ref!r}, which is not defined")
            return None
        key = file_name
        for item in (volume.get("configMap") or {}).get("items") or []:
            if item.get("path") == file_name:
                key = item.get("key")
        text = (cm.get("data") or {}).get(key)
        if text is None:
            problems.append(f"{cm['__file__']}: ConfigMap {cm_ref} has no key {key!r}")
        return text

    policy_text, policy_where = None, None
    for mount in gateway.get("volumeMounts") or []:
        mount_path = mount.get("mountPath", "").rstrip("/")
        if not config_path.startswith(mount_path + "/"):
            continue
        if mount.get("readOnly") is not True:
            problems.append(f"{cname}: the policy volume is not mounted readOnly")
        volume = volumes.get(mount.get("name"))
        if volume is None:
            problems.append(f"{cname}: volumeMount {mount.get('name')} has no volume")
            continue
        file_name = config_path[len(mount_path) + 1 :]
        if volume.get("configMap"):
            policy_text = config_map_policy(volume, file_name)
            policy_where = f"ConfigMap/{volume['configMap'].get('name')}"
        elif "emptyDir" in volume:
            if (volume.get("emptyDir") or {}).get("medium") != "Memory":
                problems.append(f"{where}: the rendered policy volume {volume.get('name')} is not emptyDir medium: Memory")
            # An init container writes it: find the ConfigMap template it reads.
            for init in init_containers:
                mounts = init.get("volumeMounts") or []
                if not any(m.get("name") == mount.get("name") for m in mounts):
                    continue
                for m in mounts:
                    template = volumes.get(m.get("name"))
                    if template and template.get("configMap"):
                        items = (template.get("configMap") or {}).get("items") or []
                        name = items[0].get("path") if items else file_name
                        policy_text = config_map_policy(template, name)
                        policy_where = f"ConfigMap/{template['configMap'].get('name')} (rendered by {init.get('name')})"
        else:
            problems.append(f"{cname}: the policy volume is neither a ConfigMap nor an init-rendered emptyDir")
    if policy_text is None:
        problems.append(f"{cname}: {config_path} does not come from a ConfigMap (directly or via an init container)")
    else:
        policy, more = check_policy_text(policy_text, policy_where or "policy")
        problems += more

    for init in init_containers:
        iname = f"{where} initContainer {init.get('name')}"
        if init.get("image") != gateway.get("image"):
            problems.append(f"{iname}: image {init.get('image')!r} differs from the gateway's {image!r} "
                            "(it validates the policy with the same binary)")
        isc = init.get("securityContext") or {}
        if isc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            problems.append(f"{iname}: securityContext.runAsNonRoot is not true")
        if isc.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{iname}: securityContext.readOnlyRootFilesystem is not true")
        if isc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{iname}: securityContext.allowPrivilegeEscalation is not false")
        if "ALL" not in ((isc.get("capabilities") or {}).get("drop") or []):
            problems.append(f"{iname}: capabilities.drop does not contain ALL")
        if not (init.get("resources") or {}).get("limits", {}).get("memory"):
            problems.append(f"{iname}: resources.limits.memory missing")

    # Ports: the container's ports match the policy's listeners; probes on the admin port.
    ports = {p.get("containerPort") for p in gateway.get("ports") or []}
    admin_port = None
    if policy is not None:
        listen = policy.get("listen")
        for entry in listen if isinstance(listen, list) else [listen]:
            # A listener is `host:port` or an object `{address: host:port, tls: {...}}`.
            text = entry.get("address") if isinstance(entry, dict) else entry
            parsed = parse_listen(text) if text else None
            if parsed is None:
                problems.append(f"{cname}: policy listen {text!r} is not host:port")
            else:
                if parsed[1] not in ports:
                    problems.append(f"{cname}: policy listens on {parsed[1]}, not a containerPort {sorted(ports)}")
                if parsed[0] in ("127.0.0.1", "localhost", "::1"):
                    problems.append(f"{cname}: policy listen {text} is loopback: the Service cannot reach it")
        admin = parse_listen(policy.get("admin_listen", "")) if policy.get("admin_listen") else None
        if admin is None:
            problems.append(f"{cname}: policy has no admin_listen: probes have nothing to hit")
        else:
            admin_port = admin[1]
            if admin_port not in ports:
                problems.append(f"{cname}: admin_listen port {admin_port} is not a containerPort")
            if admin[0] in ("127.0.0.1", "localhost", "::1"):
                problems.append(f"{cname}: admin_listen {policy.get('admin_listen')} is loopback: kubelet probes fail")
        drain = parse_duration((policy.get("limits") or {}).get("shutdown_drain_timeout", DEFAULT_DRAIN_SECONDS))
        grace = pod.get("terminationGracePeriodSeconds", 30)
        pre_stop = 0
        pre_cmd = (((gateway.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
        if len(pre_cmd) == 2 and pre_cmd[0] == "sleep" and str(pre_cmd[1]).isdigit():
            pre_stop = int(pre_cmd[1])
        if drain is not None and grace <= drain + pre_stop:
            problems.append(
                f"{where}: terminationGracePeriodSeconds {grace} <= drain {drain:g}s + preStop {pre_stop}s"
            )

    for probe_name, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        probe = gateway.get(probe_name)
        get = (probe or {}).get("httpGet") or {}
        if not probe or get.get("path") != path:
            problems.append(f"{cname}: {probe_name} must be httpGet {path}")
            continue
        port = container_port(gateway, get.get("port"))
        if port is None:
            problems.append(f"{cname}: {probe_name} port {get.get('port')!r} is not a container port")
        elif admin_port is not None and port != admin_port:
            problems.append(f"{cname}: {probe_name} hits port {port}, the admin listener is {admin_port}")

    # Service: selects the pods, targets the proxy port (not the admin port).
    for service in by_kind["Service"]:
        sname = f"{service['__file__']} Service/{service['metadata'].get('name')}"
        ssel = (service.get("spec") or {}).get("selector") or {}
        if not ssel or any(pod_labels.get(k) != v for k, v in ssel.items()):
            problems.append(f"{sname}: selector does not match the pod labels")
        for port in (service.get("spec") or {}).get("ports") or []:
            target = container_port(gateway, port.get("targetPort", port.get("port")))
            if target is None or target not in ports:
                problems.append(f"{sname}: targetPort {port.get('targetPort')!r} is not a container port")
            elif admin_port is not None and target == admin_port:
                problems.append(f"{sname}: exposes the admin port {target} (metrics must stay internal)")

    for pdb in by_kind["PodDisruptionBudget"]:
        pname = f"{pdb['__file__']} PodDisruptionBudget/{pdb['metadata'].get('name')}"
        psel = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if not psel or any(pod_labels.get(k) != v for k, v in psel.items()):
            problems.append(f"{pname}: selector does not match the pod labels")
        if "minAvailable" not in (pdb.get("spec") or {}) and "maxUnavailable" not in (pdb.get("spec") or {}):
            problems.append(f"{pname}: neither minAvailable nor maxUnavailable")

    # Secrets: the Redis password comes from a Secret, by env var or file, into whichever
    # container fills the ${REDIS_PASSWORD} placeholder of the policy.
    all_containers = containers + init_containers
    secret_envs = {
        e.get("name")
        for c in all_containers
        for e in c.get("env") or []
        if (e.get("valueFrom") or {}).get("secretKeyRef")
    }
    secret_volumes = any(v.get("secret") for v in pod.get("volumes") or [])
    if not secret_envs and not secret_volumes:
        problems.append(f"{cname}: nothing comes from a Secret (the Redis password must)")
    if policy is not None and policy.get("redis_password_file"):
        # The password file must be a mounted Secret, read-only, in the gateway container.
        path = str(policy["redis_password_file"])
        mounted = False
        for mount in gateway.get("volumeMounts") or []:
            mount_path = mount.get("mountPath", "").rstrip("/")
            if path.startswith(mount_path + "/") and (volumes.get(mount.get("name")) or {}).get("secret"):
                mounted = True
                if mount.get("readOnly") is not True:
                    problems.append(f"{cname}: the Secret volume {mount.get('name')} is not mounted readOnly")
        if not mounted:
            problems.append(f"{cname}: redis_password_file {path} is not in a mounted Secret volume")
    if policy is not None and policy.get("redis_password_env"):
        if policy["redis_password_env"] not in secret_envs:
            problems.append(f"{cname}: redis_password_env {policy['redis_password_env']} is not set from a Secret")
    if policy is not None:
        for placeholder in re.findall(r"\$\{([A-Z_][A-Z0-9_]*)\}", str(policy.get("redis", ""))):
            if placeholder not in secret_envs:
                problems.append(f"{where}: the policy's ${{{placeholder}}} is not set from a Secret in any container")
            elif not any(
                placeholder in " ".join(str(a) for a in (c.get("command") or []) + (c.get("args") or []))
                for c in init_containers
            ):
                problems.append(f"{where}: no init container replaces ${{{placeholder}}} in the policy")
    return problems


# ---------------------------------------------------------------------------------------------
# The TLS overlay (deploy/kubernetes-tls), rendered by `kubectl kustomize`


def render_overlay(directory: Path) -> tuple[list[dict] | None, str]:
    """The overlay's documents as kustomize renders them; (None, why) without kubectl."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None, "kubectl not installed"
    run = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        return [], run.stderr.strip()
    docs = [d for d in yaml.safe_load_all(run.stdout) if d]
    for doc in docs:
        doc["__file__"] = f"{directory.name} (rendered)"
    return docs, ""


def check_tls(docs: list[dict]) -> list[str]:
    """TLS at the pods: certificate files from a read-only Secret mount that cert-manager fills,
    the TLS port exposed, and a reloader that SIGHUPs the gateway when the mounted files change."""
    problems: list[str] = []
    by_kind: dict[str, list[dict]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    if not by_kind.get("Deployment") or not by_kind.get("ConfigMap"):
        return ["tls overlay: no Deployment or ConfigMap rendered"]
    deployment = by_kind["Deployment"][0]
    where = f"{deployment['__file__']} Deployment/{deployment['metadata'].get('name')}"
    pod = deployment["spec"]["template"]["spec"]
    containers = pod.get("containers") or []
    gateway = containers[0]
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    text = (by_kind["ConfigMap"][0].get("data") or {}).get("policies.yaml", "")
    policy = yaml.load(text, Loader=yaml.BaseLoader) or {}
    listen = policy.get("listen")
    listeners = [e for e in (listen if isinstance(listen, list) else [listen]) if isinstance(e, dict) and e.get("tls")]
    if not listeners:
        return [f"{where}: the policy has no listener with tls:"]
    secrets = set()
    for listener in listeners:
        tls = listener["tls"]
        for key in ("certificate", "private_key"):
            path = str(tls.get(key, ""))
            mount = next((m for m in gateway.get("volumeMounts") or []
                          if path.startswith(m.get("mountPath", "").rstrip("/") + "/")), None)
            if mount is None:
                problems.append(f"{where}: tls.{key} {path} is not inside a volume mount of the gateway")
                continue
            if mount.get("readOnly") is not True:
                problems.append(f"{where}: the mount holding tls.{key} is not readOnly")
            secret = (volumes.get(mount.get("name")) or {}).get("secret")
            if not secret:
                problems.append(f"{where}: tls.{key} does not come from a Secret volume")
                continue
            secrets.add(secret.get("secretName"))
            mode = secret.get("defaultMode")
            if mode is not None and int(str(mode), 8 if str(mode).startswith("0") else 10) & 0o007:
                problems.append(f"{where}: Secret volume {mount.get('name')} is readable by others (defaultMode {mode})")
        port = parse_listen(listener.get("address", ""))
        ports = {p.get("containerPort"): p.get("name") for p in gateway.get("ports") or []}
        if port is None or port[1] not in ports:
            problems.append(f"{where}: TLS listener {listener.get('address')} is not a containerPort")
        else:
            targets = [p.get("targetPort") for svc in by_kind.get("Service", []) for p in (svc.get("spec") or {}).get("ports") or []]
            if port[1] not in targets and ports[port[1]] not in targets:
                problems.append(f"{where}: no Service port targets the TLS listener {port[1]}")
    certificates = by_kind.get("Certificate", [])
    for name in secrets:
        issued = [c for c in certificates if (c.get("spec") or {}).get("secretName") == name]
        if not issued:
            problems.append(f"{where}: no cert-manager Certificate writes the Secret {name!r}")
        for cert in issued:
            spec = cert.get("spec") or {}
            cname = f"Certificate/{cert['metadata'].get('name')}"
            if not spec.get("dnsNames"):
                problems.append(f"{cname}: no dnsNames")
            if not spec.get("issuerRef"):
                problems.append(f"{cname}: no issuerRef")
            if (spec.get("privateKey") or {}).get("rotationPolicy") != "Always":
                problems.append(f"{cname}: privateKey.rotationPolicy is not Always (the key never changes)")
    # Reload on rotation: a sidecar that mounts the same Secret and sends SIGHUP; it can only see
    # and signal the gateway with a shared process namespace and the same user.
    mounts_secret = lambda c: any((volumes.get(m.get("name")) or {}).get("secret", {}).get("secretName") in secrets
                                  for m in c.get("volumeMounts") or [])
    reloaders = [c for c in containers[1:] if mounts_secret(c)
                 and "kill -HUP" in " ".join(str(x) for x in (c.get("command") or []) + (c.get("args") or []))]
    if not reloaders:
        problems.append(f"{where}: no sidecar sends SIGHUP when the certificate Secret changes")
    elif pod.get("shareProcessNamespace") is not True:
        problems.append(f"{where}: shareProcessNamespace is not true: the reloader cannot signal the gateway")
    pod_sc = pod.get("securityContext") or {}
    for c in reloaders:
        sc = c.get("securityContext") or {}
        rname = f"{where} container {c.get('name')}"
        if sc.get("runAsUser", pod_sc.get("runAsUser")) != (gateway.get("securityContext") or {}).get("runAsUser", pod_sc.get("runAsUser")):
            problems.append(f"{rname}: runs as another user than the gateway (cannot signal it)")
        if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            problems.append(f"{rname}: securityContext.runAsNonRoot is not true")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{rname}: securityContext.readOnlyRootFilesystem is not true")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{rname}: securityContext.allowPrivilegeEscalation is not false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            problems.append(f"{rname}: capabilities.drop does not contain ALL")
        if not ((c.get("resources") or {}).get("limits") or {}).get("memory"):
            problems.append(f"{rname}: resources.limits.memory missing")
        if c.get("image") != gateway.get("image"):
            problems.append(f"{rname}: image differs from the gateway's (one image to patch and pin)")
    return problems


# ---------------------------------------------------------------------------------------------
# Dockerfile


def dockerfile_instructions(text: str) -> list[tuple[int, str, str]]:
    """(line, INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, buffer, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buffer and (not line or line.startswith("#")):
            continue
        if buffer and line.startswith("#"):
            continue
        if not buffer:
            start = number
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        buffer += line
        word, _, rest = buffer.partition(" ")
        out.append((start, word.upper(), rest.strip()))
        buffer = ""
    if buffer:
        word, _, rest = buffer.partition(" ")
        out.append((start, word.upper(), rest.strip()))
    return out


def check_dockerfile(text: str, name: str = "Dockerfile") -> list[str]:
    problems: list[str] = []
    instructions = dockerfile_instructions(text)
    stages: list[dict] = []
    for line, word, args in instructions:
        if word == "FROM":
            parts = args.split()
            image = next((p for p in parts if not p.startswith("--")), "")
            alias = parts[parts.index("AS") + 1] if "AS" in parts else (parts[parts.index("as") + 1] if "as" in parts else None)
            stages.append({"image": image, "alias": alias, "line": line, "body": []})
        elif not stages:
            if word != "ARG":
                problems.append(f"{name}:{line}: {word} before the first FROM")
        else:
            stages[-1]["body"].append((line, word, args))
    if len(stages) < 2:
        return problems + [f"{name}: {len(stages)} FROM stage(s); a multi-stage build needs a build and a runtime stage"]
    if stages[0]["image"] != BUILD_IMAGE:
        problems.append(f"{name}:{stages[0]['line']}: build stage is {stages[0]['image']!r}, expected {BUILD_IMAGE}")
    if stages[-1]["image"] != RUNTIME_IMAGE:
        problems.append(f"{name}:{stages[-1]['line']}: runtime stage is {stages[-1]['image']!r}, expected {RUNTIME_IMAGE}")
    aliases = {s["alias"] for s in stages if s["alias"]}
    for stage in stages:
        if stage["image"].endswith(":latest") or ":" not in stage["image"] and "@" not in stage["image"]:
            problems.append(f"{name}:{stage['line']}: base image {stage['image']!r} is not pinned to a tag")
        for line, word, args in stage["body"]:
            if word == "ADD" and re.search(r"\b(https?|ftp)://", args):
                problems.append(f"{name}:{line}: ADD of a URL (download in a RUN with a checksum, or COPY)")
            if word == "ADD":
                problems.append(f"{name}:{line}: ADD used; prefer COPY (ADD unpacks archives and fetches URLs)")
            if word == "COPY":
                m = re.search(r"--from=(\S+)", args)
                if m and m.group(1) not in aliases and not m.group(1).isdigit():
                    problems.append(f"{name}:{line}: COPY --from={m.group(1)} names no stage")
            if word == "RUN" and re.search(r"\b(curl|wget)\b[^|]*\|\s*(ba)?sh", args):
                problems.append(f"{name}:{line}: pipes a download into a shell")
    runtime = stages[-1]["body"]
    users = [(line, args) for line, word, args in runtime if word == "USER"]
    if not users:
        problems.append(f"{name}: the runtime stage has no USER (it would run as root)")
    else:
        line, user = users[-1]
        who = user.split(":")[0]
        if who in ("root", "0", ""):
            problems.append(f"{name}:{line}: the runtime stage runs as {user!r}")
        # After the last USER nothing should need root.
        for later_line, word, _ in runtime:
            if later_line > line and word == "RUN":
                problems.append(f"{name}:{later_line}: RUN after USER in the runtime stage")
    if not any(word == "EXPOSE" for _, word, _ in runtime):
        problems.append(f"{name}: the runtime stage has no EXPOSE")
    if not any(word in ("ENTRYPOINT", "CMD") for _, word, _ in runtime):
        problems.append(f"{name}: the runtime stage has no ENTRYPOINT/CMD")
    installed = set()
    for line, word, args in runtime:
        if word == "RUN" and "apt-get install" in args:
            after = args.split("apt-get install", 1)[1].split("&&")[0]
            installed |= {w for w in after.split() if not w.startswith("-") and w != "\\"}
    extra = installed - RUNTIME_PACKAGES
    if extra:
        problems.append(f"{name}: the runtime stage installs more than it needs: {sorted(extra)}")
    missing = RUNTIME_PACKAGES - installed
    if missing:
        problems.append(f"{name}: the runtime stage does not install {sorted(missing)}")
    if not any(word == "COPY" and "--from=" in args for _, word, args in runtime):
        problems.append(f"{name}: the runtime stage copies nothing from the build stage")
    return problems


# ---------------------------------------------------------------------------------------------
# systemd unit


REQUIRED_UNIT = {
    "DynamicUser": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "NoNewPrivileges": "yes",
    "CapabilityBoundingSet": "",
    "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    "MemoryDenyWriteExecute": "yes",
    "LockPersonality": "yes",
    "RestrictNamespaces": "yes",
    "ExecReload": "/bin/kill -HUP $MAINPID",
    "KillSignal": "SIGTERM",
    "Restart": "on-failure",
}


def parse_unit(text: str) -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        values.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return values


def check_unit(text: str, name: str = "attest-gateway.service") -> list[str]:
    problems: list[str] = []
    unit = parse_unit(text)
    for key, expected in REQUIRED_UNIT.items():
        got = unit.get(f"Service.{key}")
        if got is None:
            problems.append(f"{name}: [Service] {key}= missing (expected {expected!r})")
        elif got[-1] != expected:
            problems.append(f"{name}: [Service] {key}={got[-1]!r}, expected {expected!r}")
    filters = unit.get("Service.SystemCallFilter", [])
    if "@system-service" not in filters:
        problems.append(f"{name}: SystemCallFilter=@system-service missing")
    if not unit.get("Service.LimitNOFILE"):
        problems.append(f"{name}: LimitNOFILE missing")
    caps = unit.get("Service.AmbientCapabilities")
    if caps and caps[-1]:
        problems.append(f"{name}: AmbientCapabilities={caps[-1]} set while the bounding set is empty")
    exec_start = (unit.get("Service.ExecStart") or [""])[-1]
    if " serve " not in f" {exec_start} " or "--config" not in exec_start:
        problems.append(f"{name}: ExecStart does not run `attest-gateway serve --config …`")
    stop = parse_duration((unit.get("Service.TimeoutStopSec") or [""])[-1])
    if stop is None:
        problems.append(f"{name}: TimeoutStopSec missing or unreadable")
    elif stop <= DEFAULT_DRAIN_SECONDS:
        problems.append(f"{name}: TimeoutStopSec {stop:g}s is not above the drain timeout {DEFAULT_DRAIN_SECONDS}s")
    if unit.get("Service.User") and unit.get("Service.DynamicUser", ["no"])[-1] == "yes":
        problems.append(f"{name}: User= together with DynamicUser=yes")
    return problems


# ---------------------------------------------------------------------------------------------
# redis.conf (static; deploy-lint.sh also loads it into a real redis-server)


def check_redis_conf(text: str, name: str = "redis.conf") -> list[str]:
    problems = []
    conf: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            conf[key.lower()] = value.strip()
    for key, expected in (("appendonly", "yes"), ("appendfsync", "everysec"), ("maxmemory-policy", "noeviction")):
        if conf.get(key) != expected:
            problems.append(f"{name}: {key} is {conf.get(key)!r}, expected {expected!r}")
    if "maxmemory" not in conf:
        problems.append(f"{name}: maxmemory not set (noeviction needs a ceiling to refuse writes at)")
    if conf.get("protected-mode") == "no" and "requirepass" not in conf:
        problems.append(f"{name}: protected-mode no without requirepass")
    return problems


# ---------------------------------------------------------------------------------------------


def helm_self_test(failures: list[str]) -> int:
    """Breaks the chart (templates in a copy, values in memory) and expects each break caught."""
    import shutil
    import tempfile

    values = yaml.safe_load((HELM_CHART / "values.yaml").read_text())

    def with_values(label, fn):
        broken = copy.deepcopy(values)
        fn(broken)
        if not helm_render.check_chart(HELM_CHART, check_policy_text, values_override=broken):
            failures.append(f"self-test: helm {label} was not caught")

    def with_template(label, name, old, new):
        with tempfile.TemporaryDirectory() as tmp:
            chart = Path(tmp) / "chart"
            shutil.copytree(HELM_CHART, chart)
            path = chart / "templates" / name
            text = path.read_text()
            assert old in text, (name, old)
            path.write_text(text.replace(old, new, 1))
            if not helm_render.check_chart(chart, check_policy_text):
                failures.append(f"self-test: helm {label} was not caught")

    cases = [
        ("unused value", lambda: with_values("unused value", lambda v: v.update(unusedKnob=1))),
        ("undefined value", lambda: with_template("undefined value", "deployment.yaml", ".Values.image.tag", ".Values.image.version")),
        ("unbalanced braces", lambda: with_template("unbalanced braces", "service.yaml", "{{ .Values.service.type }}", "{{ .Values.service.type }")),
        ("if without end", lambda: with_template("if without end", "pdb.yaml", "{{- end }}", "")),
        ("syntax outside the subset", lambda: with_template("range", "configmap.yaml", "{{- .Values.policy | nindent 4 }}", "{{- range .Values.env }}x{{- end }}")),
        ("rendered YAML broken", lambda: with_template("bad indent", "configmap.yaml", "nindent 4", "nindent 1")),
        ("probe on proxy port", lambda: with_template("probe port", "deployment.yaml", "path: /readyz, port: admin", "path: /readyz, port: proxy")),
        ("root fs writable", lambda: with_template("rofs", "deployment.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false")),
        ("no checksum without watch", lambda: with_template("checksum", "deployment.yaml", "checksum/policy:", "checksum/other:")),
        ("watch flag dropped", lambda: with_template("watch", "deployment.yaml", '"--watch"]', "]")),
        ("subPath policy mount", lambda: with_template("subPath", "deployment.yaml", "mountPath: /etc/attest-gateway, readOnly: true", "mountPath: /etc/attest-gateway/policies.yaml, subPath: policies.yaml, readOnly: true")),
        ("upstream open to all", lambda: with_template("netpol", "networkpolicy.yaml", "    - from:\n        - podSelector:", "    - from:\n        - namespaceSelector: {}\n        - podSelector:")),
        ("no egress to redis", lambda: with_values("redis egress", lambda v: None) if False else with_template("redis egress", "networkpolicy.yaml", ".Values.networkPolicy.redis.podLabels | toYaml", ".Values.networkPolicy.upstream.podLabels | toYaml")),
        ("HPA with replicas", lambda: with_template("hpa replicas", "deployment.yaml", "{{- if not .Values.hpa.enabled }}", "{{- if .Values.pdb.enabled }}")),
        ("policy port mismatch", lambda: with_values("ports", lambda v: v["ports"].update(proxy=8443))),
        ("password in policy", lambda: with_values("password", lambda v: v.update(policy=v["policy"].replace('redis://${REDIS_HOST}', "redis://:hunter2@redis")))),
        ("secret elsewhere", lambda: with_values("secret path", lambda v: v.update(policy=v["policy"].replace("/run/secrets/redis/password", "/etc/pw")))),
        ("ServiceMonitor wrong API", lambda: with_template("sm api", "servicemonitor.yaml", "monitoring.coreos.com/v1", "monitoring.coreos.com/v1alpha1")),
    ]
    for _, run in cases:
        run()
    return len(cases)


def check_compose(path: Path, text: str | None = None) -> list[str]:
    """docker-compose.yml: gateway (built from deploy/Dockerfile), redis, upstream; the policy
    it mounts names the other services and the published ports are the policy's."""
    problems: list[str] = []
    where = path.name
    try:
        doc = yaml.safe_load(text if text is not None else path.read_text())
    except (OSError, yaml.YAMLError) as e:
        return [f"{where}: {e}"]
    services = (doc or {}).get("services") or {}
    for name in ("gateway", "redis", "upstream"):
        if name not in services:
            problems.append(f"{where}: no `{name}` service")
    if problems:
        return problems
    gw = services["gateway"]
    build = gw.get("build") or {}
    dockerfile = (ROOT / build.get("context", ".") / build.get("dockerfile", "Dockerfile")).resolve()
    if not dockerfile.is_file():
        problems.append(f"{where}: gateway build.dockerfile {dockerfile} does not exist")
    for dep in gw.get("depends_on") or []:
        if dep not in services:
            problems.append(f"{where}: gateway depends_on unknown service {dep}")
    if set(gw.get("depends_on") or []) != {"redis", "upstream"}:
        problems.append(f"{where}: gateway must depend on redis and upstream")
    policy_path = None
    for volume in gw.get("volumes") or []:
        source, _, target = str(volume).partition(":")
        target = target.split(":")[0]
        if target == "/etc/attest-gateway/policies.yaml":
            policy_path = (path.parent / source).resolve()
        elif target == "/etc/attest-gateway":
            policy_path = (path.parent / source / "policies.yaml").resolve()
    if policy_path is None or not policy_path.is_file():
        return problems + [f"{where}: gateway does not mount an existing policy at /etc/attest-gateway/policies.yaml"]
    try:
        policy = yaml.load(policy_path.read_text(), Loader=yaml.BaseLoader)
    except yaml.YAMLError as e:
        return problems + [f"{where}: {policy_path.name} does not parse: {e}"]
    env = {}
    for item in gw.get("environment") or []:
        k, _, v = str(item).partition("=")
        env[k] = v
    redis_url = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), m.group(0)), str(policy.get("redis", "")))
    if "${" in redis_url:
        problems.append(f"{where}: the policy's redis URL uses a variable the gateway's environment does not set")
    elif not re.match(r"redis://([^@/]*@)?redis:\d+", redis_url):
        problems.append(f"{where}: the policy's redis URL does not name the `redis` service: {redis_url}")
    urls = [u.get("url", "") for u in (policy.get("upstreams") or {}).values() if isinstance(u, dict)]
    if not any(re.match(r"https?://upstream:\d+", u) for u in urls):
        problems.append(f"{where}: no policy upstream points at the `upstream` service")
    cmd = " ".join(map(str, services["upstream"].get("command") or []))
    if "scripts/upstream.py" not in cmd:
        problems.append(f"{where}: the upstream service does not run scripts/upstream.py")
    published = {str(p).split(":")[-1] for p in gw.get("ports") or []}
    for key in ("listen", "admin_listen"):
        listen = str(policy.get(key, ""))
        if not listen.startswith("0.0.0.0:"):
            problems.append(f"{where}: the policy's {key} must bind 0.0.0.0 in a container")
        elif listen.rsplit(":", 1)[1] not in published:
            problems.append(f"{where}: the policy's {key} port is not published")
    return problems


def compose_self_test(failures: list[str]) -> int:
    text = COMPOSE.read_text()
    cases = [
        ("no redis service", text.replace("  redis:\n", "  cache:\n", 1)),
        ("missing Dockerfile", text.replace("dockerfile: deploy/Dockerfile", "dockerfile: deploy/Missing")),
        ("admin port unpublished", text.replace('"9090:9090"', '"9191:9191"')),
        ("upstream not upstream.py", text.replace("scripts/upstream.py", "scripts/other.py")),
        ("unset variable", text.replace("REDIS_HOST=redis", "REDIS_HOSTNAME=redis")),
    ]
    for label, broken in cases:
        assert broken != text, label
        if not check_compose(COMPOSE, broken):
            failures.append(f"self-test: compose {label} was not caught")
    return len(cases)


def run_checks() -> tuple[list[str], list[str]]:
    """Returns (problems, notes)."""
    problems, notes = [], []
    problems += check_dockerfile((DEPLOY / "Dockerfile").read_text())
    notes.append("Dockerfile: stages, base images, USER, ADD, COPY --from, runtime packages checked")
    problems += check_unit((DEPLOY / "attest-gateway.service").read_text())
    notes.append("attest-gateway.service: required directives checked")
    problems += check_redis_conf((DEPLOY / "redis.conf").read_text())
    notes.append("redis.conf: durability and eviction settings checked")
    if yaml is None:
        notes.append("SKIPPED: Kubernetes manifests (PyYAML missing: apt-get install python3-yaml)")
    else:
        docs, more = load_manifests(DEPLOY / "kubernetes")
        problems += more
        problems += check_kubernetes(docs)
        notes.append(f"kubernetes: {len(docs)} documents parsed and cross-checked")
        tls_docs, why = render_overlay(TLS_OVERLAY)
        if tls_docs is None:
            notes.append(f"SKIPPED: {TLS_OVERLAY.name} overlay ({why}: it is rendered with kubectl kustomize)")
        elif not tls_docs:
            problems.append(f"{TLS_OVERLAY.name}: kubectl kustomize failed: {why}")
        else:
            problems += check_kubernetes(tls_docs)
            problems += check_tls(tls_docs)
            notes.append(f"{TLS_OVERLAY.name}: {len(tls_docs)} rendered documents cross-checked, TLS mounts and reload checked")
        problems += helm_render.check_chart(HELM_CHART, check_policy_text)
        notes.append(
            "helm/attest-gateway: templates rendered by scripts/checks/helm_render.py (the checked template subset) "
            "with defaults and every feature on; values used/defined both ways; objects cross-checked"
        )
        problems += check_compose(COMPOSE)
        notes.append("docker-compose.yml: parsed, services, build, ports and policy references cross-checked")
    return problems, notes


def self_test() -> int:
    """Each mutation of a real file must be caught; the real files must pass."""
    failures = []
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    unit = (DEPLOY / "attest-gateway.service").read_text()
    redis_conf = (DEPLOY / "redis.conf").read_text()
    cases = [
        ("Dockerfile USER root", check_dockerfile, re.sub(r"^USER .*$", "USER root", dockerfile, flags=re.M)),
        ("Dockerfile without USER", check_dockerfile, re.sub(r"^USER .*$", "", dockerfile, flags=re.M)),
        ("Dockerfile ADD URL", check_dockerfile, dockerfile.replace("WORKDIR /src", "ADD https://example.invalid/x.tgz /x\nWORKDIR /src")),
        ("Dockerfile single stage", check_dockerfile, dockerfile.split("# ---- runtime stage")[0]),
        ("Dockerfile latest runtime", check_dockerfile, dockerfile.replace("FROM debian:bookworm-slim", "FROM debian:latest")),
        ("Dockerfile extra runtime package", check_dockerfile, dockerfile.replace("libyaml-0-2 ca-certificates", "libyaml-0-2 ca-certificates curl")),
        ("Dockerfile bad COPY --from", check_dockerfile, dockerfile.replace("--from=build", "--from=builder")),
        ("unit without DynamicUser", check_unit, re.sub(r"^DynamicUser=yes$", "", unit, flags=re.M)),
        ("unit short TimeoutStopSec", check_unit, re.sub(r"^TimeoutStopSec=.*$", "TimeoutStopSec=10s", unit, flags=re.M)),
        ("unit capability", check_unit, re.sub(r"^CapabilityBoundingSet=$", "CapabilityBoundingSet=CAP_SYS_ADMIN", unit, flags=re.M)),
        ("unit no syscall filter", check_unit, re.sub(r"^SystemCallFilter=@system-service$", "", unit, flags=re.M)),
        ("redis allkeys-lru", check_redis_conf, redis_conf.replace("maxmemory-policy noeviction", "maxmemory-policy allkeys-lru")),
        ("redis appendonly no", check_redis_conf, redis_conf.replace("appendonly yes", "appendonly no")),
    ]
    for label, check, text in cases:
        if not check(text):
            failures.append(f"self-test: {label} was not caught")
    total = len(cases)
    if yaml is not None:
        docs, _ = load_manifests(DEPLOY / "kubernetes")

        def mutate(label, fn):
            nonlocal total
            total += 1
            broken = copy.deepcopy(docs)
            fn({d["kind"]: d for d in broken})
            if not check_kubernetes(broken):
                failures.append(f"self-test: {label} was not caught")

        def container(k):
            return k["Deployment"]["spec"]["template"]["spec"]["containers"][0]

        def cm_replace(old, new):
            def fn(k):
                data = k["ConfigMap"]["data"]
                assert old in data["policies.yaml"], old
                data["policies.yaml"] = data["policies.yaml"].replace(old, new)
            return fn

        mutate("no readiness probe", lambda k: container(k).pop("readinessProbe"))
        mutate("liveness on /", lambda k: container(k)["livenessProbe"]["httpGet"].update(path="/"))
        mutate("probe on proxy port", lambda k: container(k)["readinessProbe"]["httpGet"].update(port="proxy"))
        mutate("root filesystem writable", lambda k: container(k)["securityContext"].update(readOnlyRootFilesystem=False))
        mutate("runAsNonRoot false", lambda k: container(k)["securityContext"].update(runAsNonRoot=False))
        mutate("image latest", lambda k: container(k).update(image="attest-gateway:latest"))
        mutate("no resources", lambda k: container(k).pop("resources"))
        mutate("admin on loopback", cm_replace("admin_listen: 0.0.0.0:9090", "admin_listen: 127.0.0.1:9090"))
        mutate("listen port mismatch", cm_replace("listen: 0.0.0.0:8080", "listen: 0.0.0.0:8443"))
        mutate("password in ConfigMap", cm_replace("redis://redis.", "redis://:hunter2@redis."))
        mutate("dev trust root", cm_replace("trust_roots: []", "trust_roots: [ /etc/dev-ca.pem ]"))
        mutate("service targets admin", lambda k: k["Service"]["spec"]["ports"][0].update(targetPort="admin"))
        mutate("pdb selects nothing", lambda k: k["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].update(x="y"))
        mutate("short grace period", lambda k: k["Deployment"]["spec"]["template"]["spec"].update(terminationGracePeriodSeconds=10))
        def pod_spec(k):
            return k["Deployment"]["spec"]["template"]["spec"]

        def drop_secret_mount(k):
            container(k)["volumeMounts"] = [m for m in container(k)["volumeMounts"] if m["name"] != "redis-password"]

        def secret_mount(k):
            return next(m for m in container(k)["volumeMounts"] if m["name"] == "redis-password")

        mutate("no secret", lambda k: pod_spec(k).update(volumes=[v for v in pod_spec(k)["volumes"] if not v.get("secret")]))
        mutate("password file not mounted", drop_secret_mount)
        mutate("secret mount writable", lambda k: secret_mount(k).update(readOnly=False))
        mutate("password file elsewhere", cm_replace("/run/secrets/redis/password", "/etc/redis-password"))
        mutate("policy from a writable volume", lambda k: pod_spec(k)["volumes"][0].update(configMap=None, emptyDir={}))

        tls_docs, _ = render_overlay(TLS_OVERLAY)
        if tls_docs:
            def tls_mutate(label, fn):
                nonlocal total
                total += 1
                broken = copy.deepcopy(tls_docs)
                fn({d["kind"]: d for d in broken})
                if not check_tls(broken) and not check_kubernetes(broken):
                    failures.append(f"self-test: {label} was not caught")

            def tls_pod(k):
                return k["Deployment"]["spec"]["template"]["spec"]

            def tls_volume(k):
                return next(v for v in tls_pod(k)["volumes"] if v["name"] == "tls")

            def reloader(k):
                return tls_pod(k)["containers"][1]

            def policy_replace(old, new):
                def fn(k):
                    data = k["ConfigMap"]["data"]
                    assert old in data["policies.yaml"], old
                    data["policies.yaml"] = data["policies.yaml"].replace(old, new)
                return fn

            tls_mutate("tls: certificate outside the Secret mount", policy_replace("/run/secrets/tls/tls.crt", "/etc/attest-gateway/tls.crt"))
            tls_mutate("tls: listener without tls", policy_replace("    tls:\n", "    tlsx:\n"))
            tls_mutate("tls: Secret mount writable", lambda k: next(m for m in tls_pod(k)["containers"][0]["volumeMounts"] if m["name"] == "tls").update(readOnly=False))
            tls_mutate("tls: Secret readable by others", lambda k: tls_volume(k)["secret"].update(defaultMode=0o444))
            tls_mutate("tls: Certificate writes another Secret", lambda k: k["Certificate"]["spec"].update(secretName="other"))
            tls_mutate("tls: key never rotated", lambda k: k["Certificate"]["spec"]["privateKey"].update(rotationPolicy="Never"))
            tls_mutate("tls: no reloader", lambda k: tls_pod(k).update(containers=tls_pod(k)["containers"][:1]))
            tls_mutate("tls: no shared process namespace", lambda k: tls_pod(k).pop("shareProcessNamespace"))
            tls_mutate("tls: reloader as root", lambda k: reloader(k)["securityContext"].update(runAsUser=0))
            tls_mutate("tls: port not exposed", lambda k: k["Service"]["spec"]["ports"][0].update(targetPort="admin"))
        total += helm_self_test(failures)
        total += compose_self_test(failures)
    problems, _ = run_checks()
    failures += [f"self-test: the real files fail: {p}" for p in problems]
    for failure in failures:
        print(failure)
    print(f"deploy-lint self-test: {total - len([f for f in failures if 'was not caught' in f])} of {total} broken files caught")
    return 1 if failures else 0


def main() -> int:
    if "--self-test" in sys.argv:
        return self_test()
    problems, notes = run_checks()
    for note in notes:
        print(f"  {note}")
    for problem in problems:
        print(f"FAIL {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
