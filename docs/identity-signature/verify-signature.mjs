import crypto from "node:crypto";

// The bytes attest-gateway signed: headers is a list of [name, value] as received
// (Node: req.rawHeaders paired up; http lowercases req.headers and joins repeats).
export function canonical(method, target, headers, t, alg, kid) {
  const covered = headers
    .map(([n, v]) => [n.toLowerCase(), v.replace(/^[ \t]+|[ \t]+$/g, "")])
    .filter(([n]) => n.startsWith("x-app-attest-") && n !== "x-app-attest-signature")
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const lines = ["attest-gateway-signature-v1", t, alg, kid, method, target, ...covered.map(([n, v]) => `${n}:${v}`)];
  return Buffer.from(lines.join("\n") + "\n");
}

// keys: {kid: {alg: "hmac-sha256", secret: Buffer} | {alg: "es256", publicKeyPem: string}}.
// Returns the signing time; throws when the request is not the gateway's.
export function verifySignature(method, target, headers, keys, maxAge = 300, now = Date.now() / 1000) {
  const values = headers.filter(([n]) => n.toLowerCase() === "x-app-attest-signature").map(([, v]) => v);
  if (values.length !== 1) throw new Error("expected exactly one X-App-Attest-Signature");
  const p = Object.fromEntries(values[0].split(",").map((part) => {
    const i = part.indexOf("=");
    return [part.slice(0, i).trim(), part.slice(i + 1).trim()];
  }));
  const key = keys[p.kid];
  if (!key || key.alg !== p.alg) throw new Error(`unknown kid ${p.kid} or wrong alg ${p.alg}`);
  if (Math.abs(now - Number(p.t)) > maxAge) throw new Error("signature too old (or clock skew)");
  const message = canonical(method, target, headers, p.t, p.alg, p.kid);
  const sig = Buffer.from(p.sig, "base64url");
  const ok = p.alg === "hmac-sha256"
    ? sig.length === 32 && crypto.timingSafeEqual(crypto.createHmac("sha256", key.secret).update(message).digest(), sig)
    : crypto.verify("sha256", message, { key: key.publicKeyPem, dsaEncoding: "ieee-p1363" }, sig);
  if (!ok) throw new Error("bad signature");
  return Number(p.t);
}
