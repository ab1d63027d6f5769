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
		{"shard index outside the count", []string{"--shard-index", "2", "--shard-count", "2"}, "--shard-index 2"},
		{"cincinnati URL not http", []string{"--cincinnati-url", "ftp://mirror.example.com"}, "--cincinnati-url"},
		{"api URL not http", []string{"--api-url", "localhost:8000"}, "--api-url"},
		{"zero re-check", []string{"--recheck-after", "0s"}, "--recheck-after"},
		{"unknown log level", []string{"--log-level", "loud"}, "--log-level"},
		{"unknown flag", []string{"--cincinati-url", "https://api.openshift.com"}, "unknown flag"},
		{"missing token file", []string{"--token-file", "/nonexistent/token"}, "bearer token file"},
		{"unknown source", []string{"--source", "kafka"}, "--source"},
		{"nats without its URL", []string{"--source", "nats"}, "--nats-url"},
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

// The resolver takes its work from the API's watch unless told otherwise; the poll is then a 5-minute safety net.
func TestSourceFlagsDefaultToTheWatch(t *testing.T) {
	flags := newCommand().Flags()
	tests := []struct{ flag, want string }{
		{"source", "watch"},
		{"poll-interval", "0s"}, // the source's default: 5m beside the watch, 5s with --source poll
		{"nats-url", ""},
		{"nats-stream", ""},
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
	require.Equal(t, ":8091", newCommand().Flags().Lookup("ops-bind-address").DefValue)
}
