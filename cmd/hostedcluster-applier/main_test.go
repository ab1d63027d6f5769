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

// The many-management-clusters flags are there with their defaults.
func TestFleetFlags(t *testing.T) {
	flags := newCommand().Flags()
	for name, want := range map[string]string{
		"management-cluster-credentials": "",
		"kube-qps":                       "20",
		"kube-burst":                     "30",
		"probe-interval":                 "5s",
		"placement-retry":                "2s",
	} {
		f := flags.Lookup(name)
		require.NotNil(t, f, "--%s", name)
		require.Equal(t, want, f.DefValue, "--%s", name)
	}
}

// One management cluster (--kubeconfig) or every ManagementCluster (the credentials directory), never both: the
// command refuses before it builds anything.
func TestKubeconfigAndCredentialsDirExcludeEachOther(t *testing.T) {
	cmd := newCommand()
	cmd.SetArgs([]string{"--api-url", "http://127.0.0.1:1", "--ops-bind-address", "127.0.0.1:0",
		"--kubeconfig", "kubeconfig", "--management-cluster-credentials", t.TempDir()})
	err := cmd.Execute()
	require.ErrorContains(t, err, "--kubeconfig and --management-cluster-credentials exclude each other")
}
