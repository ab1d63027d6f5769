package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/auth"
	"github.com/hyperfleet/hyperfleet/pkg/postgres"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// emptyDatabase returns a fresh database with no schema at all, as a new production database is.
func emptyDatabase(tb testing.TB) string {
	tb.Helper()
	dsn := harness.NewDatabase(tb)
	require.NoError(tb, harness.OpenGorm(tb, dsn).Exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public").Error)
	return dsn
}

func run(tb testing.TB, args ...string) error {
	tb.Helper()
	cmd := newRootCommand()
	cmd.SetArgs(args)
	return cmd.ExecuteContext(context.Background())
}

func TestServeRefusesAnUnmigratedDatabaseAndMigrateFixesIt(t *testing.T) {
	dsn := emptyDatabase(t)
	listeners := []string{"--api-server-bindaddress", "127.0.0.1:0", "--health-server-bindaddress", "127.0.0.1:0", "--metrics-server-bindaddress", "127.0.0.1:0"}

	err := run(t, append([]string{"serve", "--db-url", dsn}, listeners...)...)
	require.ErrorIs(t, err, postgres.ErrSchemaOutdated)

	// The database URL can come from the environment like every flag.
	t.Setenv("HYPERFLEET_DB_URL", dsn)
	require.NoError(t, run(t, "migrate"))
	require.NoError(t, run(t, "migrate"), "migrating twice is a no-op")
	require.NoError(t, postgres.CheckSchema(context.Background(), harness.OpenGorm(t, dsn)))
}

func TestBadConfigurationIsRefusedBeforeAnythingStarts(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"bad env value", map[string]string{"HYPERFLEET_DB_MAX_OPEN_CONNECTIONS": "many"}, []string{"migrate"}, "HYPERFLEET_DB_MAX_OPEN_CONNECTIONS"},
		{"unknown environment", map[string]string{"HYPERFLEET_ENV": "staging"}, []string{"migrate", "--db-url", "postgres://127.0.0.1:1/x"}, "HYPERFLEET_ENV"},
		{"embedded in production", map[string]string{"HYPERFLEET_ENV": "production"}, []string{"serve", "--embedded-db"}, "--embedded-db"},
		{"bad required adapters", nil, []string{"serve", "--required-adapters", "cluster"}, "--required-adapters"},
		{"bad log level", nil, []string{"migrate", "--log-level", "loud"}, "--log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			err := run(t, tt.args...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestTokenCommandMintsWhatServeAccepts(t *testing.T) {
	dir := t.TempDir()
	mint := func(tb testing.TB, args ...string) string {
		tb.Helper()
		cmd := newRootCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"token", "--dir", dir}, args...))
		require.NoError(tb, cmd.ExecuteContext(context.Background()))
		require.Contains(tb, errOut.String(), "--jwk-cert-file "+filepath.Join(dir, "dev-jwks.json"))
		return strings.TrimSpace(out.String())
	}
	token := mint(t, "--subject", "alice", "--roles", "viewer")
	verifier, err := auth.NewVerifier(context.Background(), auth.VerifierConfig{
		JWKSFile: filepath.Join(dir, "dev-jwks.json"), Issuer: devTokenIssuer, Audience: devTokenAudience,
	})
	require.NoError(t, err)
	id, err := verifier.Verify(context.Background(), token)
	require.NoError(t, err)
	require.Equal(t, auth.Identity{Subject: "alice", Roles: []auth.Role{auth.RoleViewer}}, id)
	// The key is made once: a second token verifies with the same JWKS.
	_, err = verifier.Verify(context.Background(), mint(t, "--roles", "admin"))
	require.NoError(t, err)

	require.ErrorContains(t, run(t, "token", "--dir", dir, "--roles", "root"), "unknown role")
	t.Setenv("HYPERFLEET_ENV", "production")
	require.ErrorContains(t, run(t, "token", "--dir", dir), "production")
}
