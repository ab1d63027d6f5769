package supervisor

import (
	"errors"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// spawner starts every child from one OS thread that lives as long as the supervisor: on Linux a child's
// parent-death signal fires when the thread that forked it exits, not the process, and Go may end idle threads.
type spawner struct {
	requests chan spawnRequest
	done     chan struct{}
}

type spawnRequest struct {
	cmd  *exec.Cmd
	errc chan error
}

func newSpawner() *spawner {
	sp := &spawner{requests: make(chan spawnRequest), done: make(chan struct{})}
	go func() {
		// Never unlocked: the thread ends with the goroutine, after the last child was started and stopped.
		runtime.LockOSThread()
		for {
			select {
			case r := <-sp.requests:
				r.errc <- r.cmd.Start()
			case <-sp.done:
				return
			}
		}
	}()
	return sp
}

func (sp *spawner) start(cmd *exec.Cmd) error {
	r := spawnRequest{cmd: cmd, errc: make(chan error, 1)}
	select {
	case sp.requests <- r:
		return <-r.errc
	case <-sp.done:
		return errors.New("supervisor is stopping")
	}
}

func (sp *spawner) close() { close(sp.done) }

// stop asks c's process group to stop with its stop signal, waits up to its StopTimeout (or until kill is closed)
// for the process to exit, then kills the group; and finally stops whatever is left in the group. It returns how
// the process exited.
func (s *Supervisor) stop(c *component, pid int, exited <-chan error, kill <-chan struct{}) error {
	s.signalGroup(c, pid, c.spec.StopSignal)
	t := time.NewTimer(c.spec.StopTimeout)
	defer t.Stop()
	var err error
	select {
	case err = <-exited:
	case <-t.C:
		s.Warnf("%s did not stop within %s; killing it", c.spec.Name, c.spec.StopTimeout)
		s.signalGroup(c, pid, syscall.SIGKILL)
		err = <-exited
	case <-kill:
		s.signalGroup(c, pid, syscall.SIGKILL)
		err = <-exited
	}
	s.stopGroupLeftovers(c, pid)
	return err
}

// leftoverGrace is how long processes left in a dead child's group get between the stop signal and SIGKILL.
const leftoverGrace = 5 * time.Second

// stopGroupLeftovers stops the processes a child left in its process group when it exited (a database it ran,
// say), so that a restart does not find its ports taken.
func (s *Supervisor) stopGroupLeftovers(c *component, pgid int) {
	if !groupAlive(pgid) {
		return
	}
	s.Warnf("%s left processes behind in its process group %d; stopping them", c.spec.Name, pgid)
	s.signalGroup(c, pgid, c.spec.StopSignal)
	deadline := time.Now().Add(min(leftoverGrace, c.spec.StopTimeout))
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if groupAlive(pgid) {
		s.signalGroup(c, pgid, syscall.SIGKILL)
	}
}

// signalGroup sends sig to c's process group pgid (children are started as group leaders, so pgid is the pid). A
// group that is already gone is not worth a word.
func (s *Supervisor) signalGroup(c *component, pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.Warnf("cannot signal %s (process group %d, %s): %v", c.spec.Name, pgid, sig, err)
	}
}

// signalable reports whether kill(2) finds any process in group pgid (zombies included).
func signalable(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
