package signature

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Key is an HMAC secret (Alg "hmac-sha256") or an ES256 public key PEM (Alg "es256").
type Key struct {
	Alg          string
	Secret       []byte
	PublicKeyPEM []byte
}

// Canonical is the bytes attest-gateway signed; headers as received, in order, [name, value].
func Canonical(method, target string, headers [][2]string, t, alg, kid string) []byte {
	var covered []string
	for _, h := range headers {
		n := strings.ToLower(h[0])
		if strings.HasPrefix(n, "x-app-attest-") && n != "x-app-attest-signature" {
			covered = append(covered, n+":"+strings.Trim(h[1], " \t"))
		}
	}
	sort.SliceStable(covered, func(i, j int) bool {
		return strings.SplitN(covered[i], ":", 2)[0] < strings.SplitN(covered[j], ":", 2)[0]
	})
	lines := append([]string{"attest-gateway-signature-v1", t, alg, kid, method, target}, covered...)
	return []byte(strings.Join(lines, "\n") + "\n")
}

// Verify returns the signing time, or an error when the request is not the gateway's.
// With net/http: Verify(r.Method, r.RequestURI, pairs from r.Header, keys, 5*time.Minute).
func Verify(method, target string, headers [][2]string, keys map[string]Key, maxAge time.Duration) (time.Time, error) {
	var values []string
	for _, h := range headers {
		if strings.EqualFold(h[0], "X-App-Attest-Signature") {
			values = append(values, h[1])
		}
	}
	if len(values) != 1 {
		return time.Time{}, errors.New("expected exactly one X-App-Attest-Signature")
	}
	p := map[string]string{}
	for _, part := range strings.Split(values[0], ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok {
			p[k] = v
		}
	}
	key, ok := keys[p["kid"]]
	if !ok || key.Alg != p["alg"] {
		return time.Time{}, errors.New("unknown kid or wrong alg")
	}
	seconds, err := strconv.ParseInt(p["t"], 10, 64)
	if err != nil {
		return time.Time{}, errors.New("bad t")
	}
	signed := time.Unix(seconds, 0)
	if d := time.Since(signed); d > maxAge || d < -maxAge {
		return time.Time{}, errors.New("signature too old (or clock skew)")
	}
	sig, err := base64.RawURLEncoding.DecodeString(p["sig"])
	if err != nil {
		return time.Time{}, errors.New("bad sig encoding")
	}
	message := Canonical(method, target, headers, p["t"], p["alg"], p["kid"])
	switch key.Alg {
	case "hmac-sha256":
		mac := hmac.New(sha256.New, key.Secret)
		mac.Write(message)
		ok = hmac.Equal(mac.Sum(nil), sig)
	case "es256":
		block, _ := pem.Decode(key.PublicKeyPEM)
		if block == nil {
			return time.Time{}, errors.New("bad public key PEM")
		}
		parsed, err := x509.ParsePKIXPublicKey(block.Bytes)
		public, isEC := parsed.(*ecdsa.PublicKey)
		if err != nil || !isEC || len(sig) != 64 {
			return time.Time{}, errors.New("bad public key or signature")
		}
		digest := sha256.Sum256(message)
		ok = ecdsa.Verify(public, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
	}
	if !ok {
		return time.Time{}, errors.New("bad signature")
	}
	return signed, nil
}
