package supervisor_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hyperfleet/hyperfleet/cmd/hyperfleet-dev/internal/supervisor"
)

// The test binary doubles as the components the tests supervise: run with envChild set, it behaves as that mode
// says instead of running tests.
const (
	envChild    = "SUPERVISOR_TEST_CHILD"
	envName     = "SUPERVISOR_TEST_NAME"
	envEvents   = "SUPERVISOR_TEST_EVENTS"    // file the child appends "<name> <event>" lines to
	envAddrFile = "SUPERVISOR_TEST_ADDR_FILE" // file the child writes its listen address to
	envPIDFile  = "SUPERVISOR_TEST_PID_FILE"  // file a spawning child writes its grandchild's pid to
	envCounter  = "SUPERVISOR_TEST_COUNTER"   // file counting a job's runs
	envFailRuns = "SUPERVISOR_TEST_FAIL_RUNS" // runs of a job that fail before one succeeds
)

// Child modes.
const (
	modeServe      = "serve"       // serve /readyz until SIGTERM, then exit 0
	modeIgnoreTerm = "ignore-term" // serve, ignoring SIGTERM
	modeSpawn      = "spawn"       // start a grandchild in the same process group, then serve
	modeSleep      = "sleep"       // do nothing until killed
	modeJob        = "job"         // exit 1 for the first envFailRuns runs, then 0
	modeLog        = "log"         // print JSON log lines and a plain one, then serve
	modeSupervisor = "supervisor"  // supervise a serving child, with the state file envAddrFile names
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

func child(mode string) int {
	if mode == modeSupervisor {
		return superviseOne()
	}
	record("start")
	switch mode {
	case modeSleep:
		select {}
	case modeJob:
		runs := 1
		if b, err := os.ReadFile(os.Getenv(envCounter)); err == nil {
			runs, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			runs++
		}
		_ = os.WriteFile(os.Getenv(envCounter), []byte(strconv.Itoa(runs)), 0o600)
		fail, _ := strconv.Atoi(os.Getenv(envFailRuns))
		fmt.Printf("job run %d\n", runs)
		if runs <= fail {
			return 1
		}
		return 0
	case modeIgnoreTerm:
		signal.Ignore(syscall.SIGTERM)
	case modeSpawn:
		grandchild := exec.Command(os.Args[0]) //nolint:gosec,noctx // the test binary itself
		grandchild.Env = append(os.Environ(), envChild+"="+modeSleep, envName+"=grandchild")
		if err := grandchild.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "spawn:", err)
			return 2
		}
		writeFile(os.Getenv(envPIDFile), strconv.Itoa(grandchild.Process.Pid))
	case modeLog:
		fmt.Println(`{"time":"2026-01-02T03:04:05.678Z","level":"WARN","msg":"disk low","free":"3 GB","n":7}`)
		fmt.Println("plain line")
	}
	terms := make(chan os.Signal, 1)
	if mode != modeIgnoreTerm {
		signal.Notify(terms, syscall.SIGTERM)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 2
	}
	writeFile(os.Getenv(envAddrFile), ln.Addr().String())
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { //nolint:gosec // a test child
			_, _ = w.Write([]byte("ok"))
		}))
	}()
	<-terms
	record("stop")
	return 0
}

// superviseOne runs a supervisor over one serving child until it is killed.
func superviseOne() int {
	sup, err := supervisor.New(supervisor.Config{StateFile: os.Getenv(envAddrFile)}, []supervisor.Spec{{
		Name: "orphan", Command: os.Args[0], Env: []string{envChild + "=" + modeServe, envName + "=orphan", envAddrFile + "="},
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := sup.Run(context.Background(), nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// record appends "<name> <event>" to the events file.
func record(event string) {
	path := os.Getenv(envEvents)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	_, _ = fmt.Fprintf(f, "%s %s\n", os.Getenv(envName), event)
	_ = f.Close()
}

// writeFile writes atomically, so that a reader never sees half an address.
func writeFile(path, content string) {
	if path == "" {
		return
	}
	tmp := path + ".tmp"
	if os.WriteFile(tmp, []byte(content), 0o600) == nil {
		_ = os.Rename(tmp, path)
	}
}

// waitGone waits until no process has the given pid (or it is a zombie, which a test child never reaps).
func waitGone(tb testing.TB, pid int, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("process %d still runs after %s", pid, within)
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // not Linux: trust kill(0)
	}
	// The state is the field after the parenthesised command name; Z is a zombie.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
