package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The listener's address by environment is the runtime's (adapter.DefaultOpsBindAddress); the port is this binary's.
func TestOpsListenerHasItsOwnPort(t *testing.T) {
	t.Setenv("HYPERFLEET_ENV", "production")
	require.Equal(t, ":8092", newCommand().Flags().Lookup("ops-bind-address").DefValue)
}
