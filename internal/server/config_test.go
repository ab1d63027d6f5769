package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRequiredAdapters(t *testing.T) {
	tests := []struct {
		name    string
		specs   []string
		want    map[string][]string
		wantErr bool
	}{
		{"none", nil, map[string][]string{}, false},
		{"one kind", []string{"cluster=hostedcluster-applier"}, map[string][]string{"cluster": {"hostedcluster-applier"}}, false},
		{"kinds and lists", []string{"Cluster = a, b ; nodepool=c"}, map[string][]string{"cluster": {"a", "b"}, "nodepool": {"c"}}, false},
		{"repeated flag adds", []string{"cluster=a", "cluster=b"}, map[string][]string{"cluster": {"a", "b"}}, false},
		{"empty parts ignored", []string{";cluster=a,,;"}, map[string][]string{"cluster": {"a"}}, false},
		{"no equals", []string{"cluster"}, nil, true},
		{"no kind", []string{"=a"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRequiredAdapters(tt.specs)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestDSNFromSecretFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, value string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(value), 0o600))
		return path
	}
	cfg := DBConfig{
		HostFile: write("db.host", "db.internal\n"), PortFile: write("db.port", "6432"), NameFile: write("db.name", "fleet"),
		UserFile: write("db.user", "hyperfleet"), PasswordFile: write("db.password", "p@ss word"), SSLMode: "verify-full",
	}
	require.True(t, cfg.Configured())
	dsn, err := cfg.DSN()
	require.NoError(t, err)
	require.Equal(t, "postgres://hyperfleet:p%40ss%20word@db.internal:6432/fleet?sslmode=verify-full", dsn)

	// The URL wins; a missing password or port file means none and 5432.
	dsn, err = DBConfig{URL: "postgres://x", HostFile: cfg.HostFile}.DSN()
	require.NoError(t, err)
	require.Equal(t, "postgres://x", dsn)
	cfg.PasswordFile, cfg.PortFile = filepath.Join(dir, "absent"), filepath.Join(dir, "absent")
	dsn, err = cfg.DSN()
	require.NoError(t, err)
	require.Equal(t, "postgres://hyperfleet@db.internal:5432/fleet?sslmode=verify-full", dsn)

	cfg.HostFile = filepath.Join(dir, "absent")
	require.False(t, cfg.Configured())
	_, err = cfg.DSN()
	require.ErrorContains(t, err, "make secrets")
}

func TestValidateServeRefusesProductionWithoutAuth(t *testing.T) {
	jwt := func(c *Config) {
		c.EnableJWT = true
		c.JWT.JWKSURL = "https://sso.example.com/certs"
	}
	production := func(c *Config) {
		c.Env = EnvProduction
		c.DB.SSLMode = "verify-full"
		c.APIBindAddress, c.HealthBindAddress, c.MetricsBindAddress = DefaultBindAddresses(EnvProduction, c.InsecureNoAuth)
	}
	tests := []struct {
		name    string
		setup   []func(*Config)
		wantErr string // empty: accepted
	}{
		{name: "production without auth", setup: []func(*Config){production}, wantErr: "production needs authentication and authorization"},
		{name: "production with jwt but authz explicitly off", setup: []func(*Config){production, jwt}, wantErr: "production needs authentication and authorization"},
		{name: "production with jwt and authz", setup: []func(*Config){production, jwt, func(c *Config) { c.EnableAuthz = true }}},
		{name: "production with authz alone", setup: []func(*Config){production, func(c *Config) { c.EnableAuthz = true }}, wantErr: "--enable-authz needs --enable-jwt"},
		{
			name:  "production insecure-no-auth on its loopback defaults",
			setup: []func(*Config){func(c *Config) { c.InsecureNoAuth = true }, production},
		},
		{
			name:    "insecure-no-auth on every interface",
			setup:   []func(*Config){func(c *Config) { c.InsecureNoAuth = true }, production, func(c *Config) { c.APIBindAddress = "0.0.0.0:8000" }},
			wantErr: `--api-server-bindaddress "0.0.0.0:8000" is not a loopback address`,
		},
		{
			name:    "insecure-no-auth with an empty host",
			setup:   []func(*Config){func(c *Config) { c.InsecureNoAuth = true }, production, func(c *Config) { c.MetricsBindAddress = ":9090" }},
			wantErr: `--metrics-server-bindaddress ":9090" is not a loopback address`,
		},
		{
			name:    "insecure-no-auth on a routable address in development",
			setup:   []func(*Config){func(c *Config) { c.InsecureNoAuth, c.HealthBindAddress = true, "10.0.0.1:8080" }},
			wantErr: "--health-server-bindaddress",
		},
		{
			name: "insecure-no-auth on ::1 and localhost",
			setup: []func(*Config){func(c *Config) {
				c.InsecureNoAuth, c.APIBindAddress, c.HealthBindAddress = true, "[::1]:8000", "localhost:8080"
			}},
		},
		{
			name:    "insecure-no-auth with jwt",
			setup:   []func(*Config){func(c *Config) { c.InsecureNoAuth = true }, jwt},
			wantErr: "--insecure-no-auth contradicts --enable-jwt",
		},
		{name: "development without auth", setup: nil},
		{name: "development with jwt, authz explicitly off", setup: []func(*Config){jwt}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Env: EnvDevelopment, DB: DBConfig{SSLMode: "disable"}}
			c.APIBindAddress, c.HealthBindAddress, c.MetricsBindAddress = DefaultBindAddresses(EnvDevelopment, false)
			for _, f := range tt.setup {
				f(&c)
			}
			err := c.ValidateServe()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
	t.Run("migrate runs in production without auth flags", func(t *testing.T) {
		c := Config{Env: EnvProduction, DB: DBConfig{SSLMode: "verify-full"}}
		require.NoError(t, c.Validate())
	})
}
