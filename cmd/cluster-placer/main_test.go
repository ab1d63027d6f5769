package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCommandRefusesBadSettings(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"more than one shard", []string{"--shard-count", "2"}, "--shard-count 2"},
		{"shard index outside the count", []string{"--shard-index", "1"}, "--shard-index 1"},
		{"api URL not http", []string{"--api-url", "localhost:8000"}, "--api-url"},
		{"no vCPU per control plane", []string{"--control-plane-vcpu", "0"}, "--control-plane-vcpu"},
		{"no memory per control plane", []string{"--control-plane-memory-gib", "-1"}, "--control-plane-memory-gib"},
		{"zero retry", []string{"--retry-interval", "0s"}, "--retry-interval"},
		{"zero prune", []string{"--prune-interval", "0s"}, "--prune-interval"},
		{"applier not an adapter name", []string{"--applier-adapter", "Applier"}, "--applier-adapter"},
		{"unknown log level", []string{"--log-level", "loud"}, "--log-level"},
		{"unknown flag", []string{"--control-plane-cpu", "5"}, "unknown flag"},
		{"missing token file", []string{"--token-file", "/nonexistent/token"}, "bearer token file"},
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

// The defaults are the doc's: 5 vCPU and 18 GiB per control plane, a retry every 3 s, one shard.
func TestFlagDefaults(t *testing.T) {
	flags := newCommand().Flags()
	tests := []struct{ flag, want string }{
		{"control-plane-vcpu", "5"},
		{"control-plane-memory-gib", "18"},
		{"retry-interval", "3s"},
		{"finalize-interval", "2s"},
		{"prune-interval", "5m0s"},
		{"applier-adapter", "hostedcluster-applier"},
		{"shard-count", "1"},
		{"adapter-name", "cluster-placer"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			f := flags.Lookup(tt.flag)
			require.NotNil(t, f, "--%s", tt.flag)
			require.Equal(t, tt.want, f.DefValue)
		})
	}
}

// The listener's address by environment is the runtime's (adapter.DefaultOpsBindAddress); the port is this binary's.
func TestOpsListenerHasItsOwnPort(t *testing.T) {
	t.Setenv("HYPERFLEET_ENV", "production")
	require.Equal(t, ":8094", newCommand().Flags().Lookup("ops-bind-address").DefValue)
}
