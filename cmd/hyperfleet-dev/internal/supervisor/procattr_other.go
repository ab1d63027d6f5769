//go:build unix && !linux

package supervisor

import "syscall"

// childAttr puts a child in a process group of its own. There is no parent-death signal outside Linux: children
// of a supervisor that was killed keep running.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupAlive reports whether any process is left in group pgid.
func groupAlive(pgid int) bool { return signalable(pgid) }
