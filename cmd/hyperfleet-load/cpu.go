package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// apiProcess reads the API process's own CPU time and resident memory from its Prometheus endpoint
// (process_cpu_seconds_total, process_resident_memory_bytes): the server's cost per request, which is steadier
// than req/s on a machine the load tool and the database share.
type apiProcess struct {
	url    string
	client *http.Client
}

// sample is the process's counters at one moment.
type sample struct {
	cpu time.Duration
	rss int64
	ok  bool
}

func (p *apiProcess) sample(ctx context.Context) sample {
	if p == nil || p.url == "" {
		return sample{}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, http.NoBody)
	if err != nil {
		return sample{}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return sample{}
	}
	defer resp.Body.Close()
	var s sample
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		name, value, found := strings.Cut(lines.Text(), " ")
		if !found {
			continue
		}
		switch name {
		case "process_cpu_seconds_total":
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				s.cpu, s.ok = time.Duration(v*float64(time.Second)), true
			}
		case "process_resident_memory_bytes":
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				s.rss = int64(v)
			}
		}
	}
	return s
}

// describe says where CPU figures come from, or why there are none.
func (p *apiProcess) describe(ctx context.Context) string {
	if p == nil || p.url == "" {
		return "API CPU per request: off (--metrics-url \"\")"
	}
	if !p.sample(ctx).ok {
		return fmt.Sprintf("API CPU per request: not measured (no process_cpu_seconds_total at %s; give --metrics-url)", p.url)
	}
	return "API CPU per request from " + p.url
}

// dbBackends reads the CPU time of the PostgreSQL backends that serve one database, from /proc: PostgreSQL's
// cost per request next to the API's. It works when PostgreSQL runs on this machine (a remote or containerized
// server's processes are not in this /proc: then it says so and measures nothing). Its own backend, and
// PostgreSQL's background workers (autovacuum among them), are left out.
//
// Backends come and go with the API's connection pool, so a phase is watched, not only bracketed: a sampler
// reads every backend's CPU while the phase runs and keeps the last value of each, so a backend that exits
// mid-phase counts up to its last sample, one that starts mid-phase counts from zero.
type dbBackends struct {
	url  string
	conn *pgx.Conn
}

// dbWatch is the backends' CPU over one phase.
type dbWatch struct {
	db     *dbBackends
	before map[int32]time.Duration
	last   map[int32]time.Duration
	stop   chan struct{}
	done   chan struct{}
}

// open connects; a nil *dbBackends (no --db-url) measures nothing.
func openDBBackends(ctx context.Context, url string) (*dbBackends, error) {
	if url == "" {
		return nil, nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("--db-url: %w", err)
	}
	return &dbBackends{url: url, conn: conn}, nil
}

func (b *dbBackends) close(ctx context.Context) {
	if b != nil {
		_ = b.conn.Close(ctx)
	}
}

// cpu returns the CPU time of every client backend of the database by pid; ok is false when they cannot be read.
func (b *dbBackends) cpu(ctx context.Context) (map[int32]time.Duration, bool) {
	rows, err := b.conn.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`)
	if err != nil {
		return nil, false
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, false
	}
	out := make(map[int32]time.Duration, len(pids))
	for _, pid := range pids {
		// A containerized server's pids are its own namespace's: the same number here may be another process.
		if !isPostgresProcess(pid) {
			continue
		}
		if d, ok := processCPU(pid); ok {
			out[pid] = d
		}
	}
	return out, len(out) > 0 || len(pids) == 0
}

// isPostgresProcess tells whether pid is a PostgreSQL process of this machine (its command name; a backend's
// title changes its command line, not that).
func isPostgresProcess(pid int32) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(b)) == "postgres"
}

// processCPU is a process's CPU time: /proc/<pid>/schedstat's nanoseconds on a CPU, else utime+stime from
// /proc/<pid>/stat (in clock ticks, 100 a second on Linux).
func processCPU(pid int32) (time.Duration, bool) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid)); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return time.Duration(ns), true
			}
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces; the fields after it are counted from its closing parenthesis.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * (time.Second / 100), true
}

// describe says where database CPU figures come from, or why there are none.
func (b *dbBackends) describe(ctx context.Context) string {
	if b == nil {
		return ""
	}
	if _, ok := b.cpu(ctx); !ok {
		return "; database CPU: not measured (its backends are not in this machine's /proc)"
	}
	return "; database CPU per request from its backends' /proc"
}

// watch starts watching the backends for one phase.
func (b *dbBackends) watch(ctx context.Context) *dbWatch {
	if b == nil {
		return nil
	}
	before, ok := b.cpu(ctx)
	if !ok {
		return nil
	}
	w := &dbWatch{db: b, before: before, last: map[int32]time.Duration{}, stop: make(chan struct{}), done: make(chan struct{})}
	maps.Copy(w.last, before)
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				w.sample(ctx)
			}
		}
	}()
	return w
}

func (w *dbWatch) sample(ctx context.Context) {
	now, ok := w.db.cpu(ctx)
	if !ok {
		return
	}
	maps.Copy(w.last, now)
}

// end stops the watch and returns the backends' CPU over the phase (0 when not measured).
func (w *dbWatch) end(ctx context.Context) time.Duration {
	if w == nil {
		return 0
	}
	close(w.stop)
	<-w.done
	w.sample(ctx)
	var total time.Duration
	for pid, d := range w.last {
		total += d - w.before[pid]
	}
	return total
}
