#!/usr/bin/env bash
# deploy/prometheus/alerts.yaml and deploy/grafana/attest-gateway.json (run by `make test` via
# scripts/check-all.sh; a few seconds):
#  1. `promtool check rules` on the alerting rules, and on the Helm chart's PrometheusRule as
#     rendered (values.yaml copies alerts.yaml's groups: the two must not drift);
#  2. `promtool test rules` on deploy/prometheus/alerts.test.yaml, and every alert of alerts.yaml
#     has a case there;
#  3. every attest_gateway_* name used by the alerts and the dashboard is one the gateway exports
#     (registered under Sources/; histogram series by their family's name).
# The dashboard's queries are run against a real Prometheus scraping a running gateway by the
# end-to-end test EndToEnd.Dashboard.
set -euo pipefail
cd "$(dirname "$0")/../.."
promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
  echo "prometheus-rules: FAILED: promtool not found (make deps installs prometheus)"
  exit 1
fi
status=0
rules=deploy/prometheus/alerts.yaml
"$promtool" check rules "$rules" || status=1
(cd deploy/prometheus && "$promtool" test rules alerts.test.yaml) || status=1

# Every alert has a test case.
for alert in $(grep -E '^\s*- alert: ' "$rules" | sed -E 's/.*- alert: //'); do
  if ! grep -qE "alertname: $alert\$" deploy/prometheus/alerts.test.yaml; then
    echo "prometheus-rules: FAILED: $alert has no case in deploy/prometheus/alerts.test.yaml"
    status=1
  fi
done

# The chart's PrometheusRule (rendered with prometheusRule.enabled by the chart's template subset,
# scripts/checks/helm_render.py) carries exactly alerts.yaml's groups, and promtool accepts them.
python=/usr/bin/python3
if ! "$python" -c 'import yaml' 2>/dev/null; then python=python3; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! "$python" - "$rules" "$work/chart-rules.yaml" <<'PY'
import sys, copy
from pathlib import Path
import yaml
sys.path.insert(0, "scripts/checks")
from helm_render import render_chart
chart = Path("deploy/helm/attest-gateway")
values = yaml.safe_load((chart / "values.yaml").read_text())
values = copy.deepcopy(values)
values["prometheusRule"]["enabled"] = True
docs, _, errors = render_chart(chart, values)
rules = [d for d in docs if d and d.get("kind") == "PrometheusRule"]
expected = yaml.safe_load(Path(sys.argv[1]).read_text())["groups"]
if errors or len(rules) != 1:
    sys.exit(f"prometheus-rules: FAILED: the chart rendered {len(rules)} PrometheusRule ({errors})")
if rules[0]["spec"]["groups"] != expected:
    sys.exit("prometheus-rules: FAILED: values.yaml prometheusRule.groups differs from " + sys.argv[1])
Path(sys.argv[2]).write_text(yaml.safe_dump({"groups": rules[0]["spec"]["groups"]}))
PY
then
  status=1
else
  "$promtool" check rules "$work/chart-rules.yaml" > /dev/null || status=1
fi

# Metric names exist in the code.
names=$(grep -ohE 'attest_gateway_[a-z_]+' "$rules" deploy/grafana/attest-gateway.json | sort -u)
for name in $names; do
  family=$(echo "$name" | sed -E 's/_(bucket|sum|count)$//')
  if ! grep -rqF "\"$family\"" Sources; then
    echo "prometheus-rules: FAILED: $name is not a metric the gateway exports (no \"$family\" under Sources/)"
    status=1
  fi
done
[ "$status" = 0 ] && echo "prometheus-rules: ok ($(grep -cE '^\s*- alert: ' "$rules") alerts, $(echo "$names" | wc -w) metric names)"
exit "$status"
