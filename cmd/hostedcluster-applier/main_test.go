package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/command"
)

func TestVersionFlagPrintsVersionAndBuild(t *testing.T) {
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	require.NoError(t, cmd.Execute())
	require.Equal(t, "hostedcluster-applier version "+command.Version()+" ("+command.Build()+")\n", out.String())
}

// The listener's address by environment is the runtime's (adapter.DefaultOpsBindAddress); the port is this binary's.
func TestOpsListenerHasItsOwnPort(t *testing.T) {
	t.Setenv("HYPERFLEET_ENV", "production")
	require.Equal(t, ":8092", newCommand().Flags().Lookup("ops-bind-address").DefValue)
}
