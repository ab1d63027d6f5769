package supervisor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// childAttr puts a child in a process group of its own and has the kernel send it SIGTERM should the supervisor
// die without stopping it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// groupAlive reports whether a process that is not a zombie is left in group pgid. Zombies do not count: an
// orphan's is reaped by init, which in a container may never happen, and it holds no port or file.
func groupAlive(pgid int) bool {
	if !signalable(pgid) {
		return false
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return true
	}
	want := strconv.Itoa(pgid)
	for _, path := range stats {
		b, err := os.ReadFile(path) //nolint:gosec // a /proc path from the glob above
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid pgrp …"; comm may hold spaces and parentheses, so split after the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[2] == want && f[0] != "Z" {
			return true
		}
	}
	return false
}
