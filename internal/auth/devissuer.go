package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/atomicfile"

	"github.com/golang-jwt/jwt/v5"
)

// The files a DevIssuer keeps in its directory.
const (
	devKeyFile  = "dev-signing-key.pem"
	devJWKSFile = "dev-jwks.json"
)

// DevIssuer mints real ES256 tokens from a local key, so that development runs and tests authenticate the way
// production does, with a Verifier reading JWKSPath. It is not an identity provider: whoever can read the key file can
// mint any role, so it is for development and tests only. It is safe for concurrent use.
type DevIssuer struct {
	key  *ecdsa.PrivateKey
	kid  string
	jwks string
}

// LoadOrCreateDevIssuer returns the issuer whose P-256 key is dir/dev-signing-key.pem (PKCS #8, mode 0600), creating
// dir (0700) and the key when absent, and keeps dir/dev-jwks.json (the public key as a JWK Set, kid = RFC 7638
// thumbprint) in step with the key. Later calls reuse the key, so tokens minted earlier stay valid. Concurrent first
// calls on one dir agree on a single key: it is published with a hard link, which fails for all but one of them.
// It returns an error if dir or the files cannot be created or written, or the key file holds something other than
// a P-256 EC private key.
func LoadOrCreateDevIssuer(dir string) (*DevIssuer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("dev issuer: %w", err)
	}
	keyPath := filepath.Join(dir, devKeyFile)
	key, err := readDevKey(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createDevKey(keyPath)
	}
	if err != nil {
		return nil, fmt.Errorf("dev issuer: %w", err)
	}
	kid, jwks, err := devJWKS(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("dev issuer: %w", err)
	}
	jwksPath := filepath.Join(dir, devJWKSFile)
	// The JWK Set is derived from the key, so it is rewritten (atomically) whenever it is missing or disagrees, e.g.
	// after someone replaced the key by hand.
	if old, err := os.ReadFile(jwksPath); err != nil || !bytes.Equal(old, jwks) {
		if err := atomicfile.WriteFile(jwksPath, jwks, 0o644); err != nil {
			return nil, fmt.Errorf("dev issuer: write %s: %w", jwksPath, err)
		}
	}
	return &DevIssuer{key: key, kid: kid, jwks: jwksPath}, nil
}

// JWKSPath returns the JWK Set file to give a Verifier as VerifierConfig.JWKSFile.
func (d *DevIssuer) JWKSPath() string { return d.jwks }

// Mint returns a signed ES256 token with header kid and claims iss, aud, sub (= subject), iat and nbf (now), exp
// (now + ttl), roles (when any) and adapter (when not empty): the claim names a Verifier uses by default; and the
// claims of extra, if given (a tenant claim such as org_id, say). It returns an error if subject, issuer or audience
// is empty, ttl is not positive, a role is unknown, or extra names a claim Mint sets itself.
func (d *DevIssuer) Mint(subject string, roles []Role, adapter string, ttl time.Duration, issuer, audience string, extra ...map[string]any) (string, error) {
	switch {
	case subject == "" || issuer == "" || audience == "":
		return "", errors.New("dev issuer: subject, issuer and audience are required")
	case ttl <= 0:
		return "", fmt.Errorf("dev issuer: ttl must be positive, not %s", ttl)
	}
	now := time.Now()
	claims := jwt.MapClaims{
		"iss": issuer,
		"aud": audience,
		"sub": subject,
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(ttl).Unix(),
	}
	if len(roles) > 0 {
		names := make([]string, len(roles))
		for i, r := range roles {
			if !r.known() {
				return "", fmt.Errorf("dev issuer: unknown role %q: want one of viewer, user, platform, adapter, admin", r)
			}
			names[i] = string(r)
		}
		claims[DefaultRolesClaim] = names
	}
	if adapter != "" {
		claims[DefaultAdapterClaim] = adapter
	}
	for _, more := range extra {
		for name, v := range more {
			if _, ok := claims[name]; ok {
				return "", fmt.Errorf("dev issuer: extra claim %q is one Mint sets", name)
			}
			claims[name] = v
		}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = d.kid
	signed, err := tok.SignedString(d.key)
	if err != nil {
		return "", fmt.Errorf("dev issuer: sign: %w", err)
	}
	return signed, nil
}

func readDevKey(path string) (*ecdsa.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err // callers test for fs.ErrNotExist; the path is in the error already
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: want a PEM PRIVATE KEY block", path)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || key.Curve.Params().Name != "P-256" {
		return nil, fmt.Errorf("%s: want a P-256 EC key for ES256, found %T", path, parsed)
	}
	return key, nil
}

// createDevKey generates a key and publishes it at path unless another process got there first, in which case that
// key is returned: the key is written completely to a temporary file and then hard-linked to path, which fails if
// path exists, so no reader ever sees a partial key and no key replaces another.
func createDevKey(path string) (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	tmp, err := atomicfile.WriteTemp(filepath.Dir(path), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	if err != nil {
		return nil, fmt.Errorf("write key: %w", err)
	}
	// The link is the published key; the temporary name is removed whatever happens, best effort.
	defer func() { _ = os.Remove(tmp) }()
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readDevKey(path)
		}
		return nil, fmt.Errorf("publish key: %w", err)
	}
	return key, nil
}

// devJWKS returns pub's RFC 7638 thumbprint, used as its kid, and a JWK Set holding pub alone.
func devJWKS(pub *ecdsa.PublicKey) (kid string, jwks []byte, err error) {
	point, err := pub.ECDH() // uncompressed: 0x04 || X || Y, each coordinate 32 bytes
	if err != nil {
		return "", nil, fmt.Errorf("public key: %w", err)
	}
	b := point.Bytes()
	x := base64.RawURLEncoding.EncodeToString(b[1:33])
	y := base64.RawURLEncoding.EncodeToString(b[33:])
	// RFC 7638 hashes exactly the required members, in lexicographic order, without whitespace.
	sum := sha256.Sum256(fmt.Appendf(nil, `{"crv":"P-256","kty":"EC","x":%q,"y":%q}`, x, y))
	kid = base64.RawURLEncoding.EncodeToString(sum[:])
	type jwk struct {
		Kty string `json:"kty"`
		Crv string `json:"crv"`
		X   string `json:"x"`
		Y   string `json:"y"`
		Kid string `json:"kid"`
		Alg string `json:"alg"`
		Use string `json:"use"`
	}
	jwks, err = json.MarshalIndent(struct {
		Keys []jwk `json:"keys"`
	}{[]jwk{{Kty: "EC", Crv: "P-256", X: x, Y: y, Kid: kid, Alg: algES256, Use: "sig"}}}, "", "  ")
	if err != nil {
		return "", nil, fmt.Errorf("encode JWK Set: %w", err)
	}
	return kid, append(jwks, '\n'), nil
}

// MintWithClaims is Mint with extra claims given as one map (nil for none).
func (d *DevIssuer) MintWithClaims(subject string, roles []Role, adapter string, ttl time.Duration, issuer, audience string, extra map[string]any) (string, error) {
	return d.Mint(subject, roles, adapter, ttl, issuer, audience, extra)
}
