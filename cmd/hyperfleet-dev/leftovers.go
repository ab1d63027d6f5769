package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// prepareKubeDirs creates etcd's data directory and returns it and the certificate directory as absolute paths,
// the form in which they appear on the command lines of the processes envtest starts.
func prepareKubeDirs(cfg kubeConfig) (dataDir, certDir string, err error) {
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return "", "", fmt.Errorf("etcd data dir: %w", err)
	}
	if dataDir, err = filepath.Abs(cfg.dataDir); err != nil {
		return "", "", fmt.Errorf("etcd data dir: %w", err)
	}
	if certDir, err = filepath.Abs(cfg.certDir); err != nil {
		return "", "", fmt.Errorf("cert dir: %w", err)
	}
	return dataDir, certDir, nil
}

// fixedAddress splits addr into host and port unless it asks for a free port (port 0, or no address at all).
func fixedAddress(addr string) (host, port string, ok bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" || port == "" {
		return "", "", false
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return host, port, true
}

// stopLeftovers stops the etcd and kube-apiserver of an earlier run whose `hyperfleet-dev kube` was killed
// (envtest starts them in process groups of their own, so nothing else stops them): they would hold the ports and
// the data directory. They are found by the directories on their command lines, which envtest passes as
// --flag=value. kube-apiserver keeps nothing and is killed at once (asked nicely, it would wait for the etcd it
// lost); etcd gets SIGTERM, to flush, and SIGKILL after 10 seconds. It returns how many it found.
func stopLeftovers(dataDir, certDir string, log *slog.Logger) int {
	apiServers := findProcesses("--cert-dir=" + certDir)
	for _, pid := range apiServers {
		log.Warn("killing a leftover kube-apiserver", "pid", pid)
		signalLeftover(pid, syscall.SIGKILL, log)
	}
	etcds := findProcesses("--data-dir=" + dataDir)
	for _, pid := range etcds {
		log.Warn("stopping a leftover etcd", "pid", pid)
		signalLeftover(pid, syscall.SIGTERM, log)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range etcds {
		for running(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if running(pid) {
			signalLeftover(pid, syscall.SIGKILL, log)
		}
	}
	for _, pid := range append(apiServers, etcds...) {
		for running(pid) && time.Now().Before(deadline.Add(5*time.Second)) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return len(apiServers) + len(etcds)
}

// signalLeftover sends sig to pid; a process gone meanwhile is what was wanted.
func signalLeftover(pid int, sig syscall.Signal, log *slog.Logger) {
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		log.Warn("cannot signal a leftover process", "pid", pid, "signal", sig.String(), "error", err)
	}
}

// findProcesses returns the pids of the live processes (other than this one) with arg on their command line.
func findProcesses(arg string) []int {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil
	}
	var out []int
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline")) //nolint:gosec // a /proc path from the glob above
		if err != nil {
			continue
		}
		if slices.ContainsFunc(bytes.Split(cmdline, []byte{0}), func(a []byte) bool { return string(a) == arg }) && running(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// running reports whether pid is a live process (a zombie is not).
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || !bytes.HasPrefix(bytes.TrimSpace(stat[i+1:]), []byte("Z"))
}
