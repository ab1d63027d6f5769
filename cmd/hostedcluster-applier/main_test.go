package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionFlagPrintsVersionAndBuild(t *testing.T) {
	cmd := command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	require.NoError(t, cmd.Execute())
	require.Equal(t, "hostedcluster-applier version "+version+" ("+build+")\n", out.String())
}

func TestOpsListenerIsOnLoopbackOutsideProduction(t *testing.T) {
	tests := []struct {
		env  string
		want string
	}{
		{"", "127.0.0.1:8092"},
		{"development", "127.0.0.1:8092"},
		{"integration_testing", "127.0.0.1:8092"},
		{"production", ":8092"},
	}
	for _, tt := range tests {
		t.Run("HYPERFLEET_ENV="+tt.env, func(t *testing.T) {
			t.Setenv("HYPERFLEET_ENV", tt.env)
			require.Equal(t, tt.want, command().Flags().Lookup("ops-bind-address").DefValue)
		})
	}
}
