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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := command()
			cmd.SetArgs(append(tt.args, "--ops-bind-address", "127.0.0.1:0"))
			err := cmd.Execute()
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
