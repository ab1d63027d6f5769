package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// A list's memory must not grow with its page size: the server streams items as it reads them. The scene is the
// one from the report that found the blow-up (4 concurrent GET /nodepools?size=500 took the API from 68 MiB to
// 1.1 GiB): 500 node pools that each carry 60 KiB of user data, so that each page is about 30 MB. The API runs
// as its own process so that its peak resident set (VmHWM) is what the kernel saw, collector and all.
func TestListMemoryDoesNotGrowWithPageSize(t *testing.T) {
	const (
		pools        = 500
		userdata     = 60 << 10
		readers      = 4
		rounds       = 3
		peakLimitMiB = 200
	)
	proc := startAPIProcess(t, harness.NewDatabase(t), "--max-body-bytes", "262144")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	post := func(path, body string) string {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, proc.base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.StatusCode, "POST %s: %s", path, out)
		var created struct{ ID string }
		require.NoError(t, json.Unmarshal(out, &created))
		return created.ID
	}
	post("/versionstreams", `{"name": "stable-4-16", "spec": {"target_version": "4.16"}}`)
	cluster := post("/clusters", `{"name": "big", "spec": {"version_stream": "stable-4-16",
		"hosted_cluster": {"dns": {"base_domain": "example.com"}}}}`)
	createBigPools(ctx, t, http.DefaultClient, proc.base, cluster, pools, userdata)

	// Forget the peak that creating the pools left, so that the one read below is the lists'.
	require.NoError(t, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", proc.cmd.Process.Pid), []byte("5"), 0),
		"resetting the peak resident set needs Linux and permission to write /proc/<pid>/clear_refs")
	before := proc.residentKiB(t, "VmHWM")

	var listed sync.Map
	for round := range rounds {
		g, gctx := errgroup.WithContext(ctx)
		for reader := range readers {
			g.Go(func() error {
				req, err := http.NewRequestWithContext(gctx, http.MethodGet, proc.base+"/nodepools?size=500", http.NoBody)
				if err != nil {
					return err
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				// Decode as a client would, but item by item, so the test's own memory stays small too.
				dec := json.NewDecoder(resp.Body)
				var page struct {
					Total int64
					Items []struct{ Name string }
				}
				if err := dec.Decode(&page); err != nil {
					return fmt.Errorf("round %d reader %d: %w", round, reader, err)
				}
				if resp.StatusCode != http.StatusOK || len(page.Items) != pools || page.Total != pools {
					return fmt.Errorf("round %d reader %d: status %d, %d items, total %d", round, reader, resp.StatusCode, len(page.Items), page.Total)
				}
				for _, item := range page.Items {
					listed.Store(item.Name, true)
				}
				return nil
			})
		}
		require.NoError(t, g.Wait())
	}
	distinct := 0
	listed.Range(func(any, any) bool { distinct++; return true })
	require.Equal(t, pools, distinct, "every pool is listed")
	peak := proc.residentKiB(t, "VmHWM")
	t.Logf("API resident set: %d MiB before the lists, peak %d MiB during %d×%d concurrent pages of %d pools × %d KiB",
		before/1024, peak/1024, rounds, readers, pools, userdata>>10)
	require.Less(t, peak/1024, int64(peakLimitMiB), "peak resident set of the API while listing, MiB")
}

// apiProcess is hyperfleet-api running as its own process on loopback ports.
type apiProcess struct {
	cmd    *exec.Cmd
	base   string
	killed bool
}

// kill9 kills the process without a chance to clean up, as a crash or the OOM killer would.
func (p *apiProcess) kill9(t testing.TB) {
	t.Helper()
	p.killed = true
	require.NoError(t, p.cmd.Process.Kill())
	_ = p.cmd.Wait() // reaps it; "signal: killed" is the point
}

// startAPIProcess builds and starts `hyperfleet-api serve` on dsn with extra flags, waits until it serves and
// stops it (SIGTERM, then a clean exit is required) when the test ends.
func startAPIProcess(t testing.TB, dsn string, flags ...string) *apiProcess {
	t.Helper()
	bin := harness.Build(t, "./cmd/hyperfleet-api")
	// serve only reads the required adapters: a database that never had them gets none from migrate, as a
	// deployment's migrate Job would set them.
	stored, err := postgres.LoadRequiredAdapters(ctxFor(t), harness.OpenGorm(t, dsn))
	require.NoError(t, err)
	if stored == nil {
		out, err := exec.Command(bin, "migrate", "--db-url", dsn, "--required-adapters", "").CombinedOutput()
		require.NoError(t, err, "migrate: %s", out)
	}
	args := append([]string{"serve", "--db-url", dsn, "--api-server-bindaddress", "127.0.0.1:0",
		"--health-server-bindaddress", "127.0.0.1:0", "--metrics-server-bindaddress", "127.0.0.1:0"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HYPERFLEET_ENV=integration_testing")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var logs bytes.Buffer
	served := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		lines := bufio.NewScanner(stderr)
		lines.Buffer(make([]byte, 64<<10), 1<<20)
		for lines.Scan() {
			logs.Write(append(lines.Bytes(), '\n'))
			var line struct{ Msg, API string }
			if json.Unmarshal(lines.Bytes(), &line) == nil && line.Msg == "serving" {
				served <- line.API
			}
		}
	}()
	proc := &apiProcess{cmd: cmd}
	t.Cleanup(func() {
		if proc.killed {
			<-copied
			if t.Failed() {
				t.Logf("hyperfleet-api's log:\n%s", logs.String())
			}
			return
		}
		_ = cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		<-copied
		if err != nil {
			t.Errorf("hyperfleet-api did not stop cleanly: %v\n%s", err, logs.String())
		} else if t.Failed() {
			t.Logf("hyperfleet-api's log:\n%s", logs.String())
		}
	})
	select {
	case addr := <-served:
		proc.base = "http://" + addr + "/api/hyperfleet/v1"
		return proc
	case <-time.After(time.Minute):
		t.Fatalf("hyperfleet-api did not start serving within a minute")
		return nil
	}
}

// residentKiB reads one of the memory lines (VmRSS, VmHWM) of /proc/<pid>/status.
func (p *apiProcess) residentKiB(t testing.TB, field string) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
	return 0
}

// createBigPools creates n node pools named pool-000… under cluster, each with size bytes of user data.
func createBigPools(ctx context.Context, t *testing.T, client *http.Client, base, cluster string, n, size int) {
	t.Helper()
	script := "#cloud-config\n" + strings.Repeat("# padding that a real cloud-init file would spend on write_files\n", size/64)
	scriptJSON, err := json.Marshal(script[:size])
	require.NoError(t, err)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			body := fmt.Sprintf(`{"name": "pool-%03d", "spec": {"replicas": 1, "platform": {"hivelocity": {
				"device_type": "s1.small", "region": "LAX2", "userdata": %s}}}}`, i, scriptJSON)
			req, err := http.NewRequestWithContext(gctx, http.MethodPost, base+"/clusters/"+cluster+"/nodepools", strings.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusCreated {
				return fmt.Errorf("pool %d: %d %s", i, resp.StatusCode, out)
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}

// A list streams its page, so the status line has gone out before the last row is read. If the database fails
// after that, the server must cut the connection rather than end the JSON as if the page were whole: here the
// backend serving the list is terminated while it is still sending rows (a client that reads slowly keeps it
// there), and the client must see a truncated body, while the server goes on serving.
func TestAListThatFailsMidwayIsCutShort(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := s.base + "/api/hyperfleet/v1"
	cluster := createCluster(t, s, "big", nil)
	createBigPools(ctx, t, s.http, base, cluster.Id.String(), 500, 60<<10)

	// A 4 KiB receive buffer and no reading after the first kilobyte hold the server, and so its query, mid-page.
	dialer := &net.Dialer{Control: func(_, _ string, raw syscall.RawConn) error {
		var sockErr error
		err := raw.Control(func(fd uintptr) {
			sockErr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, sockErr)
	}}
	transport := &http.Transport{DialContext: dialer.DialContext}
	defer transport.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/nodepools?size=500", http.NoBody)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: transport}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	head := make([]byte, 1024)
	_, err = io.ReadFull(resp.Body, head)
	require.NoError(t, err)

	db, err := pgx.Connect(ctx, s.dsn)
	require.NoError(t, err)
	defer db.Close(ctx)
	var pid int32
	require.Eventually(t, func() bool {
		err := db.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND state = 'active' AND wait_event = 'ClientWrite'`).Scan(&pid)
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "the list's query should be blocked sending rows to the server")
	var terminated bool
	require.NoError(t, db.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&terminated))
	require.True(t, terminated)

	rest, err := io.ReadAll(resp.Body)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "the client must learn that the page is not whole")
	require.False(t, json.Valid(append(head, rest...)), "a cut page must not parse as a complete one")

	pools, err := s.ListNodePoolsWithResponse(ctx, &api.ListNodePoolsParams{Size: ptr(api.Size(1))})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, pools.StatusCode(), "the server goes on serving: %s", pools.Body)
	require.EqualValues(t, 500, deref(pools.JSON200.Total))
}
