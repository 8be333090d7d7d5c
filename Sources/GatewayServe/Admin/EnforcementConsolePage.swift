import Foundation
import Verification

/// The enforcement console's one page (`GET /console`): inline CSS and JavaScript, nothing
/// fetched but `console.json` from the same origin, so it works offline and behind any admin
/// port-forward. The Content-Security-Policy admits exactly this style and this script (by
/// their SHA-256), no other source, no inline attribute, no frame, no form.
///
/// The script marks the document for tests and scripts: `data-state` (`loading`, `rendered`,
/// `failed`), `data-js-errors` (how many JavaScript errors, `window.onerror` and unhandled
/// rejections, happened) and each figure's cell `data-route`/`data-field`.
package enum EnforcementConsolePage {
    static let style = """
        body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d232a;background:#fafbfc}
        h1{font-size:1.3em;margin:0 0 .2em}
        .note{color:#5b6670;margin:0 0 1em}
        .cards{display:flex;flex-wrap:wrap;gap:.8em;margin-bottom:1.2em}
        .card{background:#fff;border:1px solid #d8dee4;border-radius:6px;padding:.6em .9em;min-width:12em}
        .card b{display:block;font-size:1.4em}
        .ok{color:#1a7f37}.bad{color:#cf222e}.warn{color:#9a6700}
        table{border-collapse:collapse;background:#fff}
        th,td{border:1px solid #d8dee4;padding:.3em .6em;text-align:right}
        th:first-child,td:first-child{text-align:left}
        th{background:#f0f3f6}
        #error{color:#cf222e}
        """

    static let script = """
        "use strict";
        (function () {
          const root = document.documentElement;
          let errors = 0;
          function failed(message) {
            errors += 1;
            root.setAttribute("data-js-errors", String(errors));
            root.setAttribute("data-js-error-message", String(message));
          }
          window.addEventListener("error", function (event) { failed(event.message); });
          window.addEventListener("unhandledrejection", function (event) { failed(event.reason); });
          document.addEventListener("securitypolicyviolation", function (event) {
            failed("Content-Security-Policy refused " + event.violatedDirective);
          });
          const groups = ["verified", "missing", "invalid", "replayed", "skipped", "other"];
          function el(tag, text, attributes) {
            const node = document.createElement(tag);
            if (text !== undefined) node.textContent = String(text);
            for (const name in attributes || {}) node.setAttribute(name, attributes[name]);
            return node;
          }
          function percent(share) { return share === null ? "–" : (share * 100).toFixed(1) + " %"; }
          function card(id, title, value, detail, tone) {
            const box = el("div", undefined, { class: "card", id: id });
            box.appendChild(el("span", title));
            box.appendChild(el("b", value, { class: tone || "", "data-field": id }));
            box.appendChild(el("span", detail));
            return box;
          }
          function render(data) {
            const span = data.window_seconds < 120 ? data.window_seconds + " s" :
              Math.round(data.window_seconds / 60) + " min";
            document.getElementById("window").textContent =
              "Per gateway instance, last " + span + "; updated " + data.generated_at + ".";
            const cards = document.getElementById("cards");
            cards.replaceChildren(
              card("would-refuse", "Monitored traffic enforcement would refuse", percent(data.monitored.share),
                data.monitored.would_refuse + " of " + data.monitored.requests,
                data.monitored.share > 0.01 ? "warn" : "ok"),
              card("redis", "Redis", data.redis.ready === null ? "–" : (data.redis.ready ? "ready" : "not ready"),
                data.redis.errors + " failed calls",
                data.redis.ready === false ? "bad" : (data.redis.errors > 0 ? "warn" : "ok")),
              card("apple", "Apple", data.apple.configured ? "breaker " + data.apple.breaker : "not configured",
                data.apple.failures + " failed calls", data.apple.breaker === "open" ? "bad" : "ok"),
              card("keys-enrolled", "Keys enrolled", data.keys_enrolled.window,
                data.keys_enrolled.per_hour === null ? "in the window" : data.keys_enrolled.per_hour + " per hour"));
            const head = el("tr");
            ["Route", "Mode", "Rollout %", "Requests"].concat(groups, ["Would refuse", "Key limit refusals"])
              .forEach(function (title) { head.appendChild(el("th", title)); });
            const body = document.getElementById("routes");
            body.replaceChildren(head);
            data.routes.forEach(function (route) {
              const row = el("tr", undefined, { "data-route": route.name });
              function cell(field, value) {
                row.appendChild(el("td", value, { "data-route": route.name, "data-field": field }));
              }
              cell("name", route.name);
              cell("mode", route.mode);
              cell("enforce_percent", route.enforce_percent);
              cell("requests", route.requests);
              groups.forEach(function (group) { cell(group, route.groups[group]); });
              cell("would_refuse", route.monitored === 0 ? "–" :
                route.would_refuse + " (" + percent(route.would_refuse_share) + ")");
              const limits = Object.keys(route.key_limit_refusals).map(function (limit) {
                return limit + ": " + route.key_limit_refusals[limit];
              });
              cell("key_limit_refusals", data.key_limit_refusals_present ? (limits.join(", ") || "0") : "n/a");
              body.appendChild(row);
            });
            const unrouted = document.getElementById("unrouted");
            unrouted.textContent = data.unrouted.requests === 0 ? "" :
              data.unrouted.requests + " requests matched no route or were refused before routing (" +
              Object.keys(data.unrouted.verdicts).map(function (verdict) {
                return verdict + ": " + data.unrouted.verdicts[verdict];
              }).join(", ") + ").";
            unrouted.setAttribute("data-field", "unrouted");
            const versions = document.getElementById("versions");
            const names = Object.keys(data.bundle_versions);
            versions.textContent = names.length === 0 ? "" : "Valid assertions by app version: " +
              names.map(function (name) { return name + ": " + data.bundle_versions[name]; }).join(", ") + ".";
            versions.setAttribute("data-field", "versions");
            document.getElementById("error").textContent = "";
            root.setAttribute("data-generated-at", data.generated_at);
            root.setAttribute("data-state", "rendered");
          }
          function refresh() {
            fetch("console.json", { cache: "no-store", credentials: "same-origin" })
              .then(function (response) {
                if (!response.ok) throw new Error("console.json answered " + response.status);
                return response.json();
              })
              .then(render)
              .catch(function (error) {
                document.getElementById("error").textContent = String(error);
                root.setAttribute("data-state", "failed");
              });
          }
          refresh();
          setInterval(refresh, 10000);
        })();
        """

    static let html = """
        <!doctype html>
        <html lang="en" data-state="loading" data-js-errors="0">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>attest-gateway: enforcement console</title>
        <style>\(style)</style>
        </head>
        <body>
        <h1>Enforcement console</h1>
        <p class="note" id="window">Loading…</p>
        <p id="error"></p>
        <div class="cards" id="cards"></div>
        <table id="routes"></table>
        <p class="note" id="unrouted"></p>
        <p class="note" id="versions"></p>
        <script>\(script)</script>
        </body>
        </html>

        """

    /// `'sha256-…'` of one inline element's text, as CSP spells a hash source.
    static func hashSource(_ text: String) -> String {
        "'sha256-" + Data(SHA256.hash(Array(text.utf8))).base64EncodedString() + "'"
    }

    static let contentSecurityPolicy =
        "default-src 'none'; script-src \(hashSource(script)); style-src \(hashSource(style)); "
        + "connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// The page's bytes (built once).
    static let body: [UInt8] = Array(html.utf8)
}
