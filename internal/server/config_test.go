package server

import (
	"os"
	"path/filepath"
	"strings"
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
		// Only a valid adapter name can ever report; requiring another would keep the kind from being Ready.
		{"upper case adapter", []string{"cluster=Applier"}, nil, true},
		{"adapter with a dot", []string{"cluster=applier.v2"}, nil, true},
		{"adapter with an underscore", []string{"cluster=hosted_applier"}, nil, true},
		{"adapter ending in a dash", []string{"cluster=applier-"}, nil, true},
		{"adapter name too long", []string{"cluster=" + strings.Repeat("a", 64)}, nil, true},
		{"adapter name at its limit", []string{"cluster=" + strings.Repeat("a", 63)}, map[string][]string{"cluster": {strings.Repeat("a", 63)}}, false},
		{"one bad name among good ones", []string{"cluster=applier,Bad"}, nil, true},
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
