package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCommandRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "api-key")
	require.NoError(t, os.WriteFile(key, []byte("secret\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no api key file", nil, "--api-key-file is required"},
		{"missing api key file", []string{"--api-key-file", filepath.Join(dir, "nope")}, "--api-key-file"},
		{"empty api key file", []string{"--api-key-file", empty}, "is empty"},
		{"hivelocity URL not http", []string{"--api-key-file", key, "--hivelocity-url", "core.hivelocity.net/api/v2"}, "--hivelocity-url"},
		{"burst below a claim's two calls", []string{"--api-key-file", key, "--hivelocity-burst", "1"}, "--hivelocity-burst 1"},
		{"negative account budget", []string{"--api-key-file", key, "--hivelocity-account-rps", "-1"}, "--hivelocity-account-rps"},
		{"account burst below a claim's two calls", []string{"--api-key-file", key, "--hivelocity-account-burst", "1"}, "--hivelocity-account-burst 1"},
		{"zero orphan grace", []string{"--api-key-file", key, "--orphan-grace", "0s"}, "--orphan-grace"},
		{"zero claim settle", []string{"--api-key-file", key, "--claim-settle", "0s"}, "--claim-settle"},
		{"zero list TTL", []string{"--api-key-file", key, "--device-list-ttl", "0s"}, "--device-list-ttl"},
		{"base domain not a domain", []string{"--api-key-file", key, "--base-domain", "bad domain"}, "--base-domain"},
		{"shard index outside the count", []string{"--api-key-file", key, "--shard-index", "2", "--shard-count", "2"}, "--shard-index 2"},
		{"api URL not http", []string{"--api-key-file", key, "--api-url", "localhost:8000"}, "--api-url"},
		{"unknown log level", []string{"--api-key-file", key, "--log-level", "loud"}, "--log-level"},
		{"unknown flag", []string{"--api-key", "secret"}, "unknown flag"},
		{"arguments", []string{"--api-key-file", key, "extra"}, "unknown command"},
		{"missing token file", []string{"--api-key-file", key, "--token-file", "/nonexistent/token"}, "bearer token file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newCommand()
			cmd.SetArgs(append(tt.args, "--ops-bind-address", "127.0.0.1:0"))
			err := cmd.Execute()
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

// The listener's address by environment is the runtime's (adapter.DefaultOpsBindAddress); the port is this binary's.
func TestOpsListenerHasItsOwnPort(t *testing.T) {
	t.Setenv("HYPERFLEET_ENV", "production")
	require.Equal(t, ":8093", newCommand().Flags().Lookup("ops-bind-address").DefValue)
}
