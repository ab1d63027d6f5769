package main

import (
	"log/slog"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStopLeftovers starts two processes that carry an earlier run's directories on their command lines, as the
// etcd and kube-apiserver of a killed `hyperfleet-dev kube` do, and one that does not: the first two are stopped,
// the third is left alone.
func TestStopLeftovers(t *testing.T) {
	dir := t.TempDir()
	dataDir, certDir := filepath.Join(dir, "etcd"), filepath.Join(dir, "certs")
	start := func(arg string) *exec.Cmd {
		// The loop keeps the shell itself running (no exec of a last command), with arg on its command line as $0.
		cmd := exec.Command("/bin/sh", "-c", "while :; do sleep 0.05; done", arg) //nolint:noctx // stopped by the code under test
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	etcd, apiServer := start("--data-dir="+dataDir), start("--cert-dir="+certDir)
	other := start("--data-dir=" + filepath.Join(dir, "another"))
	require.Eventually(t, func() bool {
		return len(findProcesses("--data-dir="+dataDir)) == 1 && len(findProcesses("--cert-dir="+certDir)) == 1
	}, 10*time.Second, 20*time.Millisecond)

	exited := func(cmd *exec.Cmd) <-chan error {
		c := make(chan error, 1)
		go func() { c <- cmd.Wait() }()
		return c
	}
	etcdDone, apiDone := exited(etcd), exited(apiServer)
	require.Equal(t, 2, stopLeftovers(dataDir, certDir, slog.New(slog.DiscardHandler)))
	for name, done := range map[string]<-chan error{"etcd": etcdDone, "kube-apiserver": apiDone} {
		select {
		case err := <-done:
			require.Error(t, err, "%s ended by a signal", name)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s still runs", name)
		}
	}
	require.True(t, running(other.Process.Pid), "a process of another data dir was stopped")
	require.Zero(t, stopLeftovers(dataDir, certDir, slog.New(slog.DiscardHandler)))
}

func TestFixedAddress(t *testing.T) {
	tests := []struct {
		addr, host, port string
		ok               bool
	}{
		{"127.0.0.1:6443", "127.0.0.1", "6443", true},
		{":6443", "127.0.0.1", "6443", true},
		{"127.0.0.1:0", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			host, port, ok := fixedAddress(tt.addr)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.host, host)
			require.Equal(t, tt.port, port)
		})
	}
}
