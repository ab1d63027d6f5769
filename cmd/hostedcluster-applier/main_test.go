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
		"kube-api-qps":                   "50",
		"kube-api-burst":                 "100",
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

// The management cluster's rate budget must be positive: the command refuses before it builds anything.
func TestKubeAPIBudgetMustBePositive(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"zero qps", []string{"--kube-api-qps", "0"}},
		{"negative qps", []string{"--kube-api-qps", "-1"}},
		{"zero burst", []string{"--kube-api-burst", "0"}},
		{"deprecated name, zero", []string{"--kube-qps", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := newCommand()
			cmd.SetArgs(append([]string{"--api-url", "http://127.0.0.1:1", "--ops-bind-address", "127.0.0.1:0",
				"--management-cluster-credentials", t.TempDir()}, tt.args...))
			require.ErrorContains(t, cmd.Execute(), "must be positive")
		})
	}
}
