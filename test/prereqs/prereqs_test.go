// Package prereqs tests the scripts `make test` runs before any test to provide what the tests need beyond Go: a
// headless Chromium (prereqs.sh), NATS (nats.sh), Docker (docker.sh) and promtool (promtool.sh).
package prereqs

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// What the stand-in apt-get does.
const (
	installs = "installs" // records its calls; `install` puts the installed tool on PATH
	fails    = "fails"    // records its calls; `install` fails
	missing  = "missing"  // there is no apt-get
)

// stubCase is one run of a script that finds a tool or installs it with apt.
type stubCase struct {
	name     string
	present  []string // executables already on PATH
	uid      string
	apt      string
	wantCode int
	wantApt  []string
	wantErr  []string // in the script's stderr
}

// runWithStubs runs script with a PATH of stand-ins only, so that the machine's own tools and package manager stay
// out of it: `id` says who runs it, `apt-get` records its calls and, when told to install, puts installed on that
// PATH as the real one would. It checks the exit code, the apt-get calls and the messages.
func runWithStubs(t *testing.T, script, installed string, tt stubCase) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "the script needs bash")
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "apt-get.calls")
	stub := func(name, body string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	}
	for _, name := range tt.present {
		stub(name, "exit 0")
	}
	stub("id", `[ "$1" = -u ] && echo `+tt.uid)
	switch tt.apt {
	case installs:
		stub("apt-get", `echo "$*" >> `+calls+`
[ "$1" = install ] && printf '#!/bin/sh\n' > `+bin+`/`+installed+` && /bin/chmod +x `+bin+`/`+installed+`
exit 0`)
	case fails:
		stub("apt-get", `echo "$*" >> `+calls+`
[ "$1" = install ] && exit 100
exit 0`)
	}

	cmd := exec.Command(bash, script)
	cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir()}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()

	code := 0
	var exit *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exit, "running the script")
		code = exit.ExitCode()
	}
	require.Equal(t, tt.wantCode, code, "stderr:\n%s", stderr.String())
	var gotApt []string
	if b, err := os.ReadFile(calls); err == nil {
		gotApt = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	require.Equal(t, tt.wantApt, gotApt, "apt-get calls")
	for _, want := range tt.wantErr {
		require.Contains(t, stderr.String(), want)
	}
}

// TestPrereqsFindsInstallsOrSaysHow runs prereqs.sh among stand-ins (runWithStubs).
func TestPrereqsFindsInstallsOrSaysHow(t *testing.T) {
	script, err := filepath.Abs("prereqs.sh")
	require.NoError(t, err)
	tests := []stubCase{
		{name: "chromium is there", present: []string{"chromium"}, uid: "1000", apt: installs,
			wantErr: []string{"prereqs: headless Chromium for the Swagger UI test: "}},
		{name: "chromium-browser is there", present: []string{"chromium-browser"}, uid: "0", apt: installs,
			wantErr: []string{"/chromium-browser"}},
		{name: "missing, not root", uid: "1000", apt: installs, wantCode: 1,
			wantErr: []string{"ERROR: the Swagger UI test needs headless Chromium", "sudo apt-get install -y chromium"}},
		{name: "missing, root: installed with apt", uid: "0", apt: installs,
			wantApt: []string{"update -q", "install -y -q chromium"}, wantErr: []string{"installed "}},
		{name: "missing, root, apt fails", uid: "0", apt: fails, wantCode: 1,
			wantApt: []string{"update -q", "install -y -q chromium"}, wantErr: []string{"ERROR: apt-get could not install chromium", "sudo apt-get install -y chromium"}},
		{name: "missing, root without apt", uid: "0", apt: missing, wantCode: 1,
			wantErr: []string{"ERROR: the Swagger UI test needs headless Chromium", "sudo apt-get install -y chromium"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runWithStubs(t, script, "chromium", tt) })
	}
}

// TestAlertPromtoolIsFoundOrInstalled runs promtool.sh among stand-ins (runWithStubs).
func TestAlertPromtoolIsFoundOrInstalled(t *testing.T) {
	script, err := filepath.Abs("promtool.sh")
	require.NoError(t, err)
	install := []string{"update -q", "install -y -q --no-install-recommends prometheus"}
	tests := []stubCase{
		{name: "promtool is there", present: []string{"promtool"}, uid: "1000", apt: installs,
			wantErr: []string{"prereqs: promtool for the alert rules' tests: "}},
		{name: "missing, not root", uid: "1000", apt: installs, wantCode: 1,
			wantErr: []string{"ERROR: the alert rules' tests need promtool", "sudo apt-get install -y prometheus"}},
		{name: "missing, root: installed with apt", uid: "0", apt: installs, wantApt: install,
			wantErr: []string{"installed ", "/promtool"}},
		{name: "missing, root, apt fails", uid: "0", apt: fails, wantCode: 1, wantApt: install,
			wantErr: []string{"ERROR: apt-get could not install prometheus", "sudo apt-get install -y prometheus"}},
		{name: "missing, root without apt", uid: "0", apt: missing, wantCode: 1,
			wantErr: []string{"ERROR: the alert rules' tests need promtool", "sudo apt-get install -y prometheus"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runWithStubs(t, script, "promtool", tt) })
	}
}

// TestNATSIsFoundOrStarted runs nats.sh against the machine's NATS, and against a port where nothing answers,
// where (as root, as CI runs) it must start a real nats-server with JetStream.
func TestNATSIsFoundOrStarted(t *testing.T) {
	script, err := filepath.Abs("nats.sh")
	require.NoError(t, err)
	run := func(addr string) (string, error) {
		cmd := exec.Command("bash", script)
		cmd.Env = append(os.Environ(), "HYPERFLEET_TEST_NATS_ADDR="+addr, "HYPERFLEET_TEST_NATS_STORE="+t.TempDir())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		return stderr.String(), err
	}
	out, err := run("127.0.0.1:4222")
	require.NoError(t, err, out)
	require.Contains(t, out, "NATS (JetStream) for the relay tests: 127.0.0.1:4222")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	t.Cleanup(func() { _ = exec.Command("pkill", "-f", fmt.Sprintf("nats-server.* -p %d ", port)).Run() })
	out, err = run(addr)
	if os.Geteuid() != 0 {
		require.Error(t, err)
		require.Contains(t, out, "start it as root with: start-stop-daemon")
		return
	}
	require.NoError(t, err, out)
	require.Contains(t, out, "NATS answers on "+addr)
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err, "a NATS server answers where the script started it")
	require.NoError(t, conn.Close())
}

// TestDockerIsFoundOrStarted runs docker.sh: on this kind of machine (root, Debian) it finds the engine or starts
// one, and afterwards `docker info` answers.
func TestDockerIsFoundOrStarted(t *testing.T) {
	script, err := filepath.Abs("docker.sh")
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd := exec.Command("bash", script)
	cmd.Stderr = &stderr
	err = cmd.Run()
	if os.Geteuid() != 0 && err != nil {
		require.Contains(t, stderr.String(), "as root: apt-get install -y docker.io")
		return
	}
	require.NoError(t, err, stderr.String())
	require.Regexp(t, `prereqs: Docker (for the image test: )?\S+`, stderr.String())
	require.NoError(t, exec.Command("docker", "info").Run(), "the engine answers")
}
