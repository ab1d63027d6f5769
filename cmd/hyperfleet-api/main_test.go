package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/server"
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
		{"negative rate limit", nil, []string{"serve", "--rate-limit", "-1"}, "--rate-limit"},
		{"rate limit not a number", map[string]string{"HYPERFLEET_RATE_LIMIT": "fast"}, []string{"serve"}, "HYPERFLEET_RATE_LIMIT"},
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

func TestServeResolvesListenersAndRateLimitPerEnvironment(t *testing.T) {
	loopback := server.Config{APIBindAddress: "127.0.0.1:8000", HealthBindAddress: "127.0.0.1:8080", MetricsBindAddress: "127.0.0.1:9090"}
	everywhere := server.Config{APIBindAddress: ":8000", HealthBindAddress: ":8080", MetricsBindAddress: ":9090", RateLimit: 100, AdapterRateLimit: 1000}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want server.Config // only the listeners and the rate limit are compared
	}{
		{name: "HYPERFLEET_ENV unset is development", want: loopback},
		{name: "development", env: map[string]string{"HYPERFLEET_ENV": "development"}, want: loopback},
		{name: "unit testing", env: map[string]string{"HYPERFLEET_ENV": "unit_testing"}, want: loopback},
		{name: "integration testing", env: map[string]string{"HYPERFLEET_ENV": "integration_testing"}, want: loopback},
		{name: "production", env: map[string]string{"HYPERFLEET_ENV": "production"}, want: everywhere},
		{
			name: "flags win in development",
			args: []string{"--api-server-bindaddress", ":8000", "--metrics-server-bindaddress", "10.0.0.1:9100", "--rate-limit", "5"},
			want: server.Config{APIBindAddress: ":8000", HealthBindAddress: "127.0.0.1:8080", MetricsBindAddress: "10.0.0.1:9100", RateLimit: 5},
		},
		{
			name: "the environment wins in production",
			env:  map[string]string{"HYPERFLEET_ENV": "production", "HYPERFLEET_HEALTH_SERVER_BINDADDRESS": "127.0.0.1:8081", "HYPERFLEET_RATE_LIMIT": "0"},
			want: server.Config{APIBindAddress: ":8000", HealthBindAddress: "127.0.0.1:8081", MetricsBindAddress: ":9090", AdapterRateLimit: 1000},
		},
		{
			name: "an explicit 0 is unlimited in production",
			env:  map[string]string{"HYPERFLEET_ENV": "production"}, args: []string{"--rate-limit", "0", "--adapter-rate-limit", "0"},
			want: server.Config{APIBindAddress: ":8000", HealthBindAddress: ":8080", MetricsBindAddress: ":9090"},
		},
		{
			name: "the adapters' budget is its own",
			env:  map[string]string{"HYPERFLEET_ENV": "production", "HYPERFLEET_ADAPTER_RATE_LIMIT": "250"},
			want: server.Config{APIBindAddress: ":8000", HealthBindAddress: ":8080", MetricsBindAddress: ":9090", RateLimit: 100, AdapterRateLimit: 250},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parseServe(t, tt.env, tt.args...)
			got := server.Config{APIBindAddress: o.cfg.APIBindAddress, HealthBindAddress: o.cfg.HealthBindAddress,
				MetricsBindAddress: o.cfg.MetricsBindAddress, RateLimit: o.cfg.RateLimit, AdapterRateLimit: o.cfg.AdapterRateLimit}
			require.Equal(t, tt.want, got)
		})
	}
}

// TestServeHelpStatesEachDefaultOnce reads `serve --help`: flags whose default depends on HYPERFLEET_ENV explain it
// in their usage, and pflag must not add a "(default …)" of its own beside it.
func TestServeHelpStatesEachDefaultOnce(t *testing.T) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"serve", "--help"})
	require.NoError(t, cmd.ExecuteContext(context.Background()))
	lines := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if fields := strings.Fields(line); len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
			lines[fields[0]] = line
		}
	}
	tests := []struct {
		flag string
		want string
	}{
		{"--rate-limit", "--rate-limit float"},
		{"--rate-limit", "(default: 100 with HYPERFLEET_ENV=production, unlimited otherwise)"},
		{"--adapter-rate-limit", "(default: 1000 with HYPERFLEET_ENV=production, unlimited otherwise)"},
		{"--api-server-bindaddress", "(default: 127.0.0.1:8000, loopback; :8000, every interface, with HYPERFLEET_ENV=production)"},
		{"--health-server-bindaddress", "(default: 127.0.0.1:8080; :8080 with HYPERFLEET_ENV=production)"},
		{"--metrics-server-bindaddress", "(default: 127.0.0.1:9090; :9090 with HYPERFLEET_ENV=production)"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			line, ok := lines[tt.flag]
			require.True(t, ok, "serve --help has no %s:\n%s", tt.flag, out.String())
			require.Contains(t, line, tt.want)
			require.Equal(t, 1, strings.Count(line, "default"), "the default is stated once: %q", line)
		})
	}
}

func TestVersionFlagPrintsVersionAndBuild(t *testing.T) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	require.NoError(t, cmd.ExecuteContext(context.Background()))
	require.Equal(t, "hyperfleet-api version "+command.Version()+" ("+command.Build()+")\n", out.String())
}

// TestEnableJWTImpliesAuthorization: authenticated callers without role checks would all be admins, so
// --enable-jwt turns authorization on unless --enable-authz=false (or its variable) says otherwise.
func TestEnableJWTImpliesAuthorization(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantAuthz bool
	}{
		{name: "jwt alone", args: []string{"--enable-jwt"}, wantAuthz: true},
		{name: "jwt from the environment", env: map[string]string{"HYPERFLEET_ENABLE_JWT": "true"}, wantAuthz: true},
		{name: "explicitly off", args: []string{"--enable-jwt", "--enable-authz=false"}},
		{name: "explicitly off in the environment", env: map[string]string{"HYPERFLEET_ENABLE_AUTHZ": "false"}, args: []string{"--enable-jwt"}},
		{name: "neither", args: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parseServe(t, tt.env, tt.args...)
			require.Equal(t, tt.wantAuthz, o.cfg.EnableAuthz)
		})
	}
}

// TestServeCheckConfigAppliesTheProductionRule runs serve --check-config as the image would run serve: production
// without authentication is refused, and --insecure-no-auth serves on loopback only.
func TestServeCheckConfigAppliesTheProductionRule(t *testing.T) {
	jwt := []string{"--enable-jwt", "--jwk-cert-url", "https://sso.example.com/certs", "--jwt-issuer", "https://sso.example.com", "--jwt-audience", "hyperfleet"}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "the image's defaults", wantErr: "production needs authentication and authorization"},
		{name: "jwt with authz explicitly off", args: append([]string{"--enable-authz=false"}, jwt...), wantErr: "production needs authentication and authorization"},
		{name: "jwt implies authz", args: jwt},
		{name: "insecure-no-auth keeps its listeners on loopback", args: []string{"--insecure-no-auth"}},
		{name: "insecure-no-auth refuses every interface", args: []string{"--insecure-no-auth", "--api-server-bindaddress", "0.0.0.0:8000"}, wantErr: "not a loopback address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HYPERFLEET_ENV", "production")
			cmd := newRootCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetArgs(append([]string{"serve", "--check-config", "--db-url", "postgres://db.example.com/x"}, tt.args...))
			err := cmd.ExecuteContext(context.Background())
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "configuration ok\n", out.String())
		})
	}
}

// parseServe parses serve's flags as the binary would, with env as the only HYPERFLEET_* environment (besides an
// empty HYPERFLEET_ENV) and a database URL given, and returns the finished options.
func parseServe(t *testing.T, env map[string]string, args ...string) *options {
	t.Helper()
	t.Setenv("HYPERFLEET_ENV", "")
	for k, v := range env {
		t.Setenv(k, v)
	}
	o := &options{}
	cmd := newServeCommand(o)
	require.NoError(t, cmd.ParseFlags(append([]string{"--db-url", "postgres://127.0.0.1:1/x"}, args...)))
	_, err := o.finish(cmd)
	require.NoError(t, err)
	return o
}
