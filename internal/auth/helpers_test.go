package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

const (
	testIssuer   = "https://issuer.test"
	testAudience = "hyperfleet"
)

// testKey is a signing key with the kid and algorithm tokens name it by.
type testKey struct {
	kid    string
	method jwt.SigningMethod
	signer any // *rsa.PrivateKey or *ecdsa.PrivateKey
	public any
}

func newRSAKey(tb testing.TB, kid string) testKey {
	tb.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(tb, err)
	return testKey{kid: kid, method: jwt.SigningMethodRS256, signer: k, public: &k.PublicKey}
}

func newECKey(tb testing.TB, kid string) testKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	return testKey{kid: kid, method: jwt.SigningMethodES256, signer: k, public: &k.PublicKey}
}

// jwksOf returns a JWK Set publishing the public halves of keys.
func jwksOf(tb testing.TB, keys ...testKey) []byte {
	tb.Helper()
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, k := range keys {
		jwk, err := jwkset.NewJWKFromKey(k.public, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{
			KID: k.kid, ALG: jwkset.ALG(k.method.Alg()), USE: jwkset.UseSig,
		}})
		require.NoError(tb, err)
		set.Keys = append(set.Keys, jwk.Marshal())
	}
	raw, err := json.Marshal(set)
	require.NoError(tb, err)
	return raw
}

// pemOf returns the PEM encoding of a public key (PUBLIC KEY block).
func pemOf(tb testing.TB, public any) []byte {
	tb.Helper()
	der, err := x509.MarshalPKIXPublicKey(public)
	require.NoError(tb, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// claimsFor returns the claims of a token valid now for the test issuer and audience, identifying subject as a user.
func claimsFor(subject string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss":   testIssuer,
		"aud":   testAudience,
		"sub":   subject,
		"iat":   now.Unix(),
		"nbf":   now.Unix(),
		"exp":   now.Add(time.Hour).Unix(),
		"roles": []string{"user"},
	}
}

// sign returns claims signed by k, with k's kid in the header.
func sign(tb testing.TB, k testKey, claims jwt.MapClaims) string {
	tb.Helper()
	tok := jwt.NewWithClaims(k.method, claims)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.signer)
	require.NoError(tb, err)
	return s
}

func writeFile(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	require.NoError(tb, os.WriteFile(path, data, 0o600))
	return path
}

// jwksServer serves a JWK Set that the test can replace, and counts fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	body    []byte
	status  int
	fetches atomic.Int64
}

func newJWKSServer(tb testing.TB, body []byte) *jwksServer {
	tb.Helper()
	s := &jwksServer{body: body, status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		body, status := s.body, s.status
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	tb.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

// newVerifier builds a Verifier for the test issuer and audience from cfg's key source; the background refresh
// stops with the test.
func newVerifier(tb testing.TB, cfg VerifierConfig) *Verifier {
	tb.Helper()
	cfg.Issuer, cfg.Audience = testIssuer, testAudience
	v, err := NewVerifier(tb.Context(), cfg)
	require.NoError(tb, err)
	return v
}

// requireCode requires err to be a *resource.Error with code whose message contains msg.
func requireCode(tb testing.TB, err error, code resource.Code, msg string) {
	tb.Helper()
	var e *resource.Error
	require.True(tb, errors.As(err, &e), "want a *resource.Error, got %v", err)
	require.Equal(tb, code, e.Code, e.Message)
	require.Contains(tb, e.Message, msg)
}
