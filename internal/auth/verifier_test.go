package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

func TestVerify(t *testing.T) {
	rsaKey, ecKey := newRSAKey(t, "rsa-1"), newECKey(t, "ec-1")
	forger := newRSAKey(t, "rsa-1") // same kid, different key
	unpublished := newRSAKey(t, "rsa-2")
	srv := newJWKSServer(t, jwksOf(t, rsaKey, ecKey))
	v := newVerifier(t, VerifierConfig{JWKSURL: srv.URL})

	with := func(sub string, change func(jwt.MapClaims)) jwt.MapClaims {
		c := claimsFor(sub)
		change(c)
		return c
	}
	now := time.Now()
	tests := []struct {
		name    string
		token   func(t *testing.T) string
		want    Identity
		wantErr string // part of the 401 message; empty when the token must verify
	}{
		{
			name:  "RS256",
			token: func(t *testing.T) string { return sign(t, rsaKey, claimsFor("alice")) },
			want:  Identity{Subject: "alice", Roles: []Role{RoleUser}},
		},
		{
			name:  "ES256",
			token: func(t *testing.T) string { return sign(t, ecKey, claimsFor("bob")) },
			want:  Identity{Subject: "bob", Roles: []Role{RoleUser}},
		},
		{
			name: "without kid every published key is tried",
			token: func(t *testing.T) string {
				s, err := jwt.NewWithClaims(jwt.SigningMethodES256, claimsFor("bob")).SignedString(ecKey.signer)
				require.NoError(t, err)
				return s
			},
			want: Identity{Subject: "bob", Roles: []Role{RoleUser}},
		},
		{
			name: "audience list containing ours",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["aud"] = []string{"other", testAudience} }))
			},
			want: Identity{Subject: "alice", Roles: []Role{RoleUser}},
		},
		{
			name: "expired within leeway",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["exp"] = now.Add(-10 * time.Second).Unix() }))
			},
			want: Identity{Subject: "alice", Roles: []Role{RoleUser}},
		},
		{
			name: "not before within leeway",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["nbf"] = now.Add(10 * time.Second).Unix() }))
			},
			want: Identity{Subject: "alice", Roles: []Role{RoleUser}},
		},
		{
			name: "unknown roles ignored and duplicates dropped",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) {
					c["roles"] = []string{"user", "offline_access", "user", "admin"}
				}))
			},
			want: Identity{Subject: "alice", Roles: []Role{RoleUser, RoleAdmin}},
		},
		{
			name: "adapter",
			token: func(t *testing.T) string {
				return sign(t, ecKey, with("svc", func(c jwt.MapClaims) { c["roles"], c["adapter"] = []string{"adapter"}, "dns" }))
			},
			want: Identity{Subject: "svc", Roles: []Role{RoleAdapter}, Adapter: "dns"},
		},
		{
			name: "no roles claim",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("carol", func(c jwt.MapClaims) { delete(c, "roles") }))
			},
			want: Identity{Subject: "carol"},
		},
		{
			name:    "forged signature",
			token:   func(t *testing.T) string { return sign(t, forger, claimsFor("alice")) },
			wantErr: "signature is invalid",
		},
		{
			name: "claims changed after signing",
			token: func(t *testing.T) string {
				parts := strings.Split(sign(t, rsaKey, claimsFor("alice")), ".")
				other := strings.Split(sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["roles"] = []string{"admin"} })), ".")
				return parts[0] + "." + other[1] + "." + parts[2]
			},
			wantErr: "signature is invalid",
		},
		{
			name: "expired",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["exp"] = now.Add(-5 * time.Minute).Unix() }))
			},
			wantErr: "it has expired",
		},
		{
			name: "not valid yet",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["nbf"] = now.Add(5 * time.Minute).Unix() }))
			},
			wantErr: "not valid yet",
		},
		{
			name: "issued in the future",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["iat"] = now.Add(5 * time.Minute).Unix() }))
			},
			wantErr: "issued in the future",
		},
		{
			name: "without expiry",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { delete(c, "exp") }))
			},
			wantErr: "lacks required claims exp",
		},
		{
			name: "wrong issuer",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["iss"] = "https://evil.test" }))
			},
			wantErr: "issuer is not accepted",
		},
		{
			name: "without issuer",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { delete(c, "iss") }))
			},
			wantErr: "lacks required claims iss",
		},
		{
			name: "wrong audience",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["aud"] = "other" }))
			},
			wantErr: "not meant for this API",
		},
		{
			name: "without audience",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { delete(c, "aud") }))
			},
			wantErr: "lacks required claims aud",
		},
		{
			name: "alg none",
			token: func(t *testing.T) string {
				tok := jwt.NewWithClaims(jwt.SigningMethodNone, claimsFor("alice"))
				tok.Header["kid"] = rsaKey.kid
				s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
				require.NoError(t, err)
				return s
			},
			wantErr: "signing algorithm is not accepted",
		},
		{
			name: "HS256 with the public key as secret",
			token: func(t *testing.T) string {
				tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claimsFor("alice"))
				tok.Header["kid"] = rsaKey.kid
				s, err := tok.SignedString(pemOf(t, rsaKey.public))
				require.NoError(t, err)
				return s
			},
			wantErr: "signing algorithm is not accepted",
		},
		{
			name: "PS256 with a published RSA key",
			token: func(t *testing.T) string {
				return sign(t, testKey{kid: rsaKey.kid, method: jwt.SigningMethodPS256, signer: rsaKey.signer}, claimsFor("alice"))
			},
			wantErr: "signing algorithm is not accepted",
		},
		{
			name:    "unknown kid",
			token:   func(t *testing.T) string { return sign(t, unpublished, claimsFor("alice")) },
			wantErr: "not signed by a known key",
		},
		{
			name: "kid of a key published for another algorithm",
			token: func(t *testing.T) string {
				return sign(t, testKey{kid: ecKey.kid, method: jwt.SigningMethodRS256, signer: rsaKey.signer}, claimsFor("alice"))
			},
			wantErr: "not signed by a known key",
		},
		{
			name: "without identity claim",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { delete(c, "sub") }))
			},
			wantErr: `no "sub" claim`,
		},
		{
			name: "identity claim not a string",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["sub"] = 42 }))
			},
			wantErr: `no "sub" claim`,
		},
		{
			name: "roles claim not an array",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["roles"] = "admin" }))
			},
			wantErr: `"roles" claim must be an array of strings`,
		},
		{
			name: "adapter claim not a string",
			token: func(t *testing.T) string {
				return sign(t, rsaKey, with("alice", func(c jwt.MapClaims) { c["adapter"] = []string{"a"} }))
			},
			wantErr: `"adapter" claim must be a string`,
		},
		{
			name:    "not a JWT",
			token:   func(*testing.T) string { return "not-a-jwt" },
			wantErr: "not a well-formed JWT",
		},
		{
			name:    "empty",
			token:   func(*testing.T) string { return "" },
			wantErr: "a bearer token is required",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := tt.token(t)
			got, err := v.Verify(t.Context(), token)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			requireCode(t, err, resource.CodeUnauthenticated, tt.wantErr)
			require.Equal(t, Identity{}, got)
			if token != "" {
				require.NotContains(t, err.Error(), token, "the message must not echo the token")
			}
		})
	}
}

func TestVerifyClaimNames(t *testing.T) {
	key := newECKey(t, "ec-1")
	v := newVerifier(t, VerifierConfig{
		JWKSFile:      writeFile(t, "jwks.json", jwksOf(t, key)),
		IdentityClaim: "email",
		RolesClaim:    "realm_access.roles",
		AdapterClaim:  "https://hyperfleet.test/adapter",
	})
	tests := []struct {
		name    string
		claims  map[string]any
		want    Identity
		wantErr string
	}{
		{
			name:   "nested roles and URL-named adapter claim",
			claims: map[string]any{"email": "a@example.com", "realm_access": map[string]any{"roles": []string{"adapter", "uma_authorization"}}, "https://hyperfleet.test/adapter": "dns"},
			want:   Identity{Subject: "a@example.com", Roles: []Role{RoleAdapter}, Adapter: "dns"},
		},
		{
			name:   "a literal dotted claim wins over the path",
			claims: map[string]any{"email": "a@example.com", "realm_access.roles": []string{"viewer"}, "realm_access": map[string]any{"roles": []string{"admin"}}},
			want:   Identity{Subject: "a@example.com", Roles: []Role{RoleViewer}},
		},
		{
			name:   "path through a non-object",
			claims: map[string]any{"email": "a@example.com", "realm_access": "admin"},
			want:   Identity{Subject: "a@example.com"},
		},
		{
			name:    "sub is not the identity claim",
			claims:  map[string]any{"sub": "a"},
			wantErr: `no "email" claim`,
		},
		{
			name:    "empty identity",
			claims:  map[string]any{"email": ""},
			wantErr: `no "email" claim`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := claimsFor("ignored")
			delete(c, "sub")
			delete(c, "roles")
			for k, val := range tt.claims {
				c[k] = val
			}
			got, err := v.Verify(t.Context(), sign(t, key, c))
			if tt.wantErr != "" {
				requireCode(t, err, resource.CodeUnauthenticated, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestVerifierPicksUpRotatedKey(t *testing.T) {
	old, next := newRSAKey(t, "2024"), newECKey(t, "2025")
	srv := newJWKSServer(t, jwksOf(t, old))
	v := newVerifier(t, VerifierConfig{JWKSURL: srv.URL}) // default refresh interval: only the unknown kid refreshes here

	oldToken := sign(t, old, claimsFor("alice"))
	_, err := v.Verify(t.Context(), oldToken)
	require.NoError(t, err)

	srv.serve(http.StatusOK, jwksOf(t, next))
	got, err := v.Verify(t.Context(), sign(t, next, claimsFor("alice")))
	require.NoError(t, err, "a token with the new kid must make the verifier fetch the rotated set")
	require.Equal(t, "alice", got.Subject)
	require.EqualValues(t, 2, srv.fetches.Load())

	// The refresh replaced the set, so the retired key no longer verifies.
	_, err = v.Verify(t.Context(), oldToken)
	requireCode(t, err, resource.CodeUnauthenticated, "not signed by a known key")
}

func TestVerifierRefreshesPeriodically(t *testing.T) {
	revoked, kept := newECKey(t, "revoked"), newECKey(t, "kept")
	srv := newJWKSServer(t, jwksOf(t, revoked, kept))
	v := newVerifier(t, VerifierConfig{JWKSURL: srv.URL, RefreshInterval: 20 * time.Millisecond})
	token := sign(t, revoked, claimsFor("alice"))
	_, err := v.Verify(t.Context(), token)
	require.NoError(t, err)

	// Removing a key triggers no unknown-kid refresh: only the periodic one can notice it.
	srv.serve(http.StatusOK, jwksOf(t, kept))
	require.Eventually(t, func() bool {
		_, err := v.Verify(t.Context(), token)
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
	_, err = v.Verify(t.Context(), sign(t, kept, claimsFor("alice")))
	require.NoError(t, err)
}

func TestVerifierRateLimitsUnknownKIDRefresh(t *testing.T) {
	key := newRSAKey(t, "k1")
	srv := newJWKSServer(t, jwksOf(t, key))
	v := newVerifier(t, VerifierConfig{JWKSURL: srv.URL})

	for i, kid := range []string{"made-up-1", "made-up-2", "made-up-3"} {
		_, err := v.Verify(t.Context(), sign(t, testKey{kid: kid, method: key.method, signer: key.signer}, claimsFor("mallory")))
		requireCode(t, err, resource.CodeUnauthenticated, "not signed by a known key")
		// Start-up fetch, then one refresh for the first unknown kid; later ones wait for the limiter and give up.
		require.EqualValues(t, 2, srv.fetches.Load(), "after unknown kid %d", i+1)
	}
}

func TestVerifierJWKSFile(t *testing.T) {
	rsaKey, ecKey := newRSAKey(t, "rsa-1"), newECKey(t, "ec-1")
	v := newVerifier(t, VerifierConfig{JWKSFile: writeFile(t, "jwks.json", jwksOf(t, rsaKey, ecKey))})
	for _, k := range []testKey{rsaKey, ecKey} {
		got, err := v.Verify(t.Context(), sign(t, k, claimsFor("alice")))
		require.NoError(t, err, k.kid)
		require.Equal(t, "alice", got.Subject)
	}
	_, err := v.Verify(t.Context(), sign(t, newECKey(t, "ec-2"), claimsFor("alice")))
	requireCode(t, err, resource.CodeUnauthenticated, "not signed by a known key")

	t.Run("keys published without alg", func(t *testing.T) {
		// Many issuers omit alg from their JWKs, so the key lookup cannot tell RS256 from PS256: the parser must.
		raw := strings.ReplaceAll(string(jwksOf(t, rsaKey)), `"alg":"RS256",`, "")
		require.NotContains(t, raw, `"alg"`)
		v := newVerifier(t, VerifierConfig{JWKSFile: writeFile(t, "jwks.json", []byte(raw))})
		_, err := v.Verify(t.Context(), sign(t, rsaKey, claimsFor("alice")))
		require.NoError(t, err)
		pss := rsaKey
		pss.method = jwt.SigningMethodPS256
		_, err = v.Verify(t.Context(), sign(t, pss, claimsFor("alice")))
		requireCode(t, err, resource.CodeUnauthenticated, "signing algorithm is not accepted")
	})
}

func TestVerifierPEMFile(t *testing.T) {
	rsaKey, ecKey := newRSAKey(t, "ignored"), newECKey(t, "ignored")
	rsaDER := x509.MarshalPKCS1PublicKey(rsaKey.public.(*rsa.PublicKey))
	tests := []struct {
		name string
		key  testKey
		pem  []byte
	}{
		{name: "RSA PUBLIC KEY (PKIX)", key: rsaKey, pem: pemOf(t, rsaKey.public)},
		{name: "RSA PUBLIC KEY (PKCS #1)", key: rsaKey, pem: pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: rsaDER})},
		{name: "EC PUBLIC KEY", key: ecKey, pem: pemOf(t, ecKey.public)},
		{name: "EC certificate", key: ecKey, pem: selfSigned(t, ecKey)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerifier(t, VerifierConfig{JWKSFile: writeFile(t, "key.pem", tt.pem)})

			for _, kid := range []string{"", "any-kid"} {
				k := tt.key
				k.kid = kid
				got, err := v.Verify(t.Context(), sign(t, k, claimsFor("alice")))
				require.NoError(t, err, "kid %q", kid)
				require.Equal(t, "alice", got.Subject)
			}

			other := newECKey(t, "x")
			_, err := v.Verify(t.Context(), sign(t, other, claimsFor("alice")))
			requireCode(t, err, resource.CodeUnauthenticated, "")

			if tt.key.method == jwt.SigningMethodRS256 {
				// RSA-PSS would verify with this very key: only the algorithm list keeps it out.
				pss := tt.key
				pss.method = jwt.SigningMethodPS256
				_, err = v.Verify(t.Context(), sign(t, pss, claimsFor("alice")))
				requireCode(t, err, resource.CodeUnauthenticated, "signing algorithm is not accepted")
			}

			// The classic confusion: the attacker knows the PEM file and uses its bytes as an HMAC secret.
			hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claimsFor("alice"))
			forged, err := hs.SignedString(tt.pem)
			require.NoError(t, err)
			_, err = v.Verify(t.Context(), forged)
			requireCode(t, err, resource.CodeUnauthenticated, "signing algorithm is not accepted")
		})
	}
}

// selfSigned returns a PEM certificate for k's public key.
func selfSigned(tb testing.TB, k testKey) []byte {
	tb.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "issuer.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.public, k.signer)
	require.NoError(tb, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestNewVerifierErrors(t *testing.T) {
	ecKey := newECKey(t, "ec-1")
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	privDER, err := x509.MarshalPKCS8PrivateKey(ecKey.signer)
	require.NoError(t, err)
	octJWKS := []byte(`{"keys":[{"kty":"oct","kid":"h","alg":"HS256","k":"` + base64.RawURLEncoding.EncodeToString([]byte("secretsecretsecretsecret")) + `"}]}`)
	good := writeFile(t, "jwks.json", jwksOf(t, ecKey))
	failing := newJWKSServer(t, []byte("oops"))
	failing.serve(http.StatusInternalServerError, []byte("oops"))
	empty := newJWKSServer(t, []byte(`{"keys":[]}`))

	tests := []struct {
		name    string
		cfg     VerifierConfig
		wantErr string
	}{
		{name: "no key source", cfg: VerifierConfig{Issuer: testIssuer, Audience: testAudience}, wantErr: "is required"},
		{name: "both key sources", cfg: VerifierConfig{JWKSURL: empty.URL, JWKSFile: good, Issuer: testIssuer, Audience: testAudience}, wantErr: "not both"},
		{name: "no issuer", cfg: VerifierConfig{JWKSFile: good, Audience: testAudience}, wantErr: "issuer is required"},
		{name: "no audience", cfg: VerifierConfig{JWKSFile: good, Issuer: testIssuer}, wantErr: "audience is required"},
		{name: "negative leeway", cfg: VerifierConfig{JWKSFile: good, Issuer: testIssuer, Audience: testAudience, Leeway: -time.Second}, wantErr: "negative"},
		{name: "missing file", cfg: VerifierConfig{JWKSFile: t.TempDir() + "/nope.json", Issuer: testIssuer, Audience: testAudience}, wantErr: "no such file"},
		{name: "garbage file", cfg: VerifierConfig{JWKSFile: writeFile(t, "x", []byte("hello")), Issuer: testIssuer, Audience: testAudience}, wantErr: "neither PEM nor a JWK Set"},
		{name: "empty JWK Set", cfg: VerifierConfig{JWKSFile: writeFile(t, "x", []byte(`{"keys":[]}`)), Issuer: testIssuer, Audience: testAudience}, wantErr: "no RSA"},
		{name: "symmetric JWK only", cfg: VerifierConfig{JWKSFile: writeFile(t, "x", octJWKS), Issuer: testIssuer, Audience: testAudience}, wantErr: "no RSA"},
		{name: "PEM private key", cfg: VerifierConfig{JWKSFile: writeFile(t, "x", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})), Issuer: testIssuer, Audience: testAudience}, wantErr: "only the public key"},
		{name: "PEM P-384 key", cfg: VerifierConfig{JWKSFile: writeFile(t, "x", pemOf(t, &p384.PublicKey)), Issuer: testIssuer, Audience: testAudience}, wantErr: "needs P-256"},
		{name: "PEM 1024-bit RSA key", cfg: VerifierConfig{JWKSFile: writeFile(t, "x", pemOf(t, &weak.PublicKey)), Issuer: testIssuer, Audience: testAudience}, wantErr: "fewer than 2048"},
		{name: "two PEM blocks", cfg: VerifierConfig{JWKSFile: writeFile(t, "x", append(pemOf(t, ecKey.public), pemOf(t, ecKey.public)...)), Issuer: testIssuer, Audience: testAudience}, wantErr: "more than one PEM block"},
		{name: "JWKS URL failing", cfg: VerifierConfig{JWKSURL: failing.URL, Issuer: testIssuer, Audience: testAudience}, wantErr: "500"},
		{name: "JWKS URL without keys", cfg: VerifierConfig{JWKSURL: empty.URL, Issuer: testIssuer, Audience: testAudience}, wantErr: "no RSA"},
		{name: "JWKS URL not a URL", cfg: VerifierConfig{JWKSURL: "issuer.test/jwks", Issuer: testIssuer, Audience: testAudience}, wantErr: "issuer.test/jwks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewVerifier(t.Context(), tt.cfg)
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, v)
		})
	}
}

func TestBearerToken(t *testing.T) {
	tests := []struct {
		header  string
		want    string
		wantErr string
	}{
		{header: "Bearer abc.def.ghi", want: "abc.def.ghi"},
		{header: "bearer  abc.def.ghi ", want: "abc.def.ghi"},
		{header: "", wantErr: "a bearer token is required"},
		{header: "Basic dXNlcjpwdw==", wantErr: "Bearer scheme"},
		{header: "Bearer", wantErr: "Bearer scheme"},
		{header: "Bearer   ", wantErr: "carries no bearer token"},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			got, err := BearerToken(tt.header)
			if tt.wantErr != "" {
				requireCode(t, err, resource.CodeUnauthenticated, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestVerifierRemembersVerifiedTokens checks the cache of verified tokens against what a full check would say: a
// token that verified answers the same identity again, and stops verifying when it expires or when the key that
// verified it is no longer published (TestVerifierPicksUpRotatedKey and TestVerifierRefreshesPeriodically check
// the latter with tokens verified, and so remembered, before the key went).
func TestVerifierRemembersVerifiedTokens(t *testing.T) {
	key := newECKey(t, "ec-1")
	srv := newJWKSServer(t, jwksOf(t, key))
	v := newVerifier(t, VerifierConfig{JWKSURL: srv.URL, Leeway: time.Millisecond})

	lasting := sign(t, key, claimsFor("alice"))
	soon := claimsFor("bob")
	expires := time.Now().Add(time.Second).Truncate(time.Second).Add(time.Second)
	soon["exp"] = expires.Unix()
	expiring := sign(t, key, soon)
	tests := []struct {
		name    string
		token   string
		wait    time.Time // until when to wait before the second verification
		want    string    // the subject; empty when the second verification must fail
		wantErr string
	}{
		{name: "again, the same identity", token: lasting, want: "alice"},
		{name: "once expired, refused although it verified before", token: expiring, wait: expires.Add(50 * time.Millisecond), wantErr: "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, err := v.Verify(t.Context(), tt.token)
			require.NoError(t, err)
			time.Sleep(time.Until(tt.wait))
			again, err := v.Verify(t.Context(), tt.token)
			if tt.wantErr != "" {
				requireCode(t, err, resource.CodeUnauthenticated, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, first, again)
			require.Equal(t, tt.want, again.Subject)
		})
	}
}

// BenchmarkVerify measures a request's token check when the token verified before (an adapter's) and when it is
// new to the verifier.
func BenchmarkVerify(b *testing.B) {
	for _, tt := range []struct {
		name string
		key  func(testing.TB, string) testKey
	}{{"RS256", newRSAKey}, {"ES256", newECKey}} {
		key := tt.key(b, "k")
		srv := newJWKSServer(b, jwksOf(b, key))
		v := newVerifier(b, VerifierConfig{JWKSURL: srv.URL})
		token := sign(b, key, claimsFor("adapter"))
		b.Run(tt.name+"/again", func(b *testing.B) {
			for b.Loop() {
				if _, err := v.Verify(b.Context(), token); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tt.name+"/new", func(b *testing.B) {
			for b.Loop() {
				v.verified.Purge()
				if _, err := v.Verify(b.Context(), token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
