package auth

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

func TestDevIssuerCreateThenReuse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev") // created by the issuer
	first, err := LoadOrCreateDevIssuer(dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "dev-jwks.json"), first.JWKSPath())

	keyPath := filepath.Join(dir, "dev-signing-key.pem")
	info, err := os.Stat(keyPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	key, err := os.ReadFile(keyPath)
	require.NoError(t, err)
	jwks, err := os.ReadFile(first.JWKSPath())
	require.NoError(t, err)
	token, err := first.Mint("alice", []Role{RoleUser}, "", time.Hour, testIssuer, testAudience)
	require.NoError(t, err)

	second, err := LoadOrCreateDevIssuer(dir)
	require.NoError(t, err)
	require.Equal(t, first.kid, second.kid)
	require.True(t, first.key.Equal(second.key), "the second load must reuse the key")
	keyAfter, err := os.ReadFile(keyPath)
	require.NoError(t, err)
	require.Equal(t, key, keyAfter)
	jwksAfter, err := os.ReadFile(second.JWKSPath())
	require.NoError(t, err)
	require.Equal(t, jwks, jwksAfter)

	// A token minted before the reload still verifies against the JWK Set it wrote.
	v := newVerifier(t, VerifierConfig{JWKSFile: second.JWKSPath()})
	_, err = v.Verify(t.Context(), token)
	require.NoError(t, err)
}

func TestDevIssuerRestoresJWKS(t *testing.T) {
	dir := t.TempDir()
	d, err := LoadOrCreateDevIssuer(dir)
	require.NoError(t, err)
	want, err := os.ReadFile(d.JWKSPath())
	require.NoError(t, err)

	for _, damage := range []func() error{
		func() error { return os.Remove(d.JWKSPath()) },
		func() error { return os.WriteFile(d.JWKSPath(), []byte(`{"keys":[]}`), 0o644) },
	} {
		require.NoError(t, damage())
		_, err := LoadOrCreateDevIssuer(dir)
		require.NoError(t, err)
		got, err := os.ReadFile(d.JWKSPath())
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	}
}

func TestDevIssuerConcurrentFirstLoad(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	kids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d, err := LoadOrCreateDevIssuer(dir)
			errs[i] = err
			if err == nil {
				kids[i] = d.kid
			}
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, kids[0], kids[i], "every loader must end up with the one published key")
	}
	leftovers, err := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	require.NoError(t, err)
	require.Empty(t, leftovers)
}

func TestDevIssuerRejectsBadKeyFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dev-signing-key.pem"), pemOf(t, newECKey(t, "x").public), 0o600))
	_, err := LoadOrCreateDevIssuer(dir)
	require.ErrorContains(t, err, "want a PEM PRIVATE KEY block")
}

func TestDevIssuerMint(t *testing.T) {
	d, err := LoadOrCreateDevIssuer(t.TempDir())
	require.NoError(t, err)
	v := newVerifier(t, VerifierConfig{JWKSFile: d.JWKSPath()})

	tests := []struct {
		name    string
		subject string
		roles   []Role
		adapter string
		ttl     time.Duration
		want    Identity
		wantErr string
	}{
		{name: "user", subject: "alice", roles: []Role{RoleUser}, ttl: time.Hour, want: Identity{Subject: "alice", Roles: []Role{RoleUser}}},
		{name: "no roles", subject: "bob", ttl: time.Minute, want: Identity{Subject: "bob"}},
		{
			name: "adapter", subject: "svc-dns", roles: []Role{RoleAdapter, RoleViewer}, adapter: "dns", ttl: time.Hour,
			want: Identity{Subject: "svc-dns", Roles: []Role{RoleAdapter, RoleViewer}, Adapter: "dns"},
		},
		{name: "unknown role", subject: "alice", roles: []Role{"root"}, ttl: time.Hour, wantErr: `unknown role "root"`},
		{name: "no subject", ttl: time.Hour, wantErr: "subject, issuer and audience are required"},
		{name: "zero ttl", subject: "alice", wantErr: "ttl must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token, err := d.Mint(tt.subject, tt.roles, tt.adapter, tt.ttl, testIssuer, testAudience)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			got, err := v.Verify(t.Context(), token)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)

			parsed, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
			require.NoError(t, err)
			require.Equal(t, d.kid, parsed.Header["kid"])
			require.Equal(t, "ES256", parsed.Header["alg"])
			claims := parsed.Claims.(jwt.MapClaims)
			for _, c := range []string{"iat", "nbf", "exp"} {
				require.Contains(t, claims, c)
			}
			iat, err := claims.GetIssuedAt()
			require.NoError(t, err)
			exp, err := claims.GetExpirationTime()
			require.NoError(t, err)
			require.Equal(t, tt.ttl.Truncate(time.Second), exp.Sub(iat.Time))
		})
	}

	t.Run("other audience rejected", func(t *testing.T) {
		token, err := d.Mint("alice", []Role{RoleAdmin}, "", time.Hour, testIssuer, "another-api")
		require.NoError(t, err)
		_, err = v.Verify(t.Context(), token)
		requireCode(t, err, resource.CodeUnauthenticated, "not meant for this API")
	})
}
