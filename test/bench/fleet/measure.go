package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// process is one process of the system, by the name the table gives it.
type process struct {
	name string
	pid  int
}

// findProcesses reads hyperfleet-dev up's state file for its components' processes. A management cluster's kube
// component runs etcd and kube-apiserver as its children, which are what work: they are listed instead of it.
func findProcesses(stateFile string) ([]process, error) {
	raw, err := os.ReadFile(stateFile)
	if err != nil {
		return nil, fmt.Errorf("hyperfleet-dev up's state file: %w", err)
	}
	var st struct {
		Components []struct {
			Name  string `json:"name"`
			PID   int    `json:"pid"`
			Ready bool   `json:"ready"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", stateFile, err)
	}
	var out []process
	for _, c := range st.Components {
		if _, err := readStat(c.PID); c.PID <= 0 || err != nil {
			continue // a job that has ended (migrate, seed)
		}
		if mc, ok := strings.CutPrefix(c.Name, "kube-"); ok {
			children, err := childrenOf(c.PID)
			if err != nil {
				return nil, err
			}
			for _, child := range children {
				out = append(out, process{name: child.name + " (" + mc + ")", pid: child.pid})
			}
			continue
		}
		out = append(out, process{name: c.Name, pid: c.PID})
	}
	if !slices.ContainsFunc(out, func(p process) bool { return p.name == "hyperfleet-api" }) {
		return nil, fmt.Errorf("%s names no running hyperfleet-api", stateFile)
	}
	return out, nil
}

// childrenOf lists the processes whose parent is pid, named by their command.
func childrenOf(pid int) ([]process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []process
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := readStat(child)
		if err != nil || stat.ppid != pid {
			continue
		}
		out = append(out, process{name: stat.comm, pid: child})
	}
	return out, nil
}

// stat is what this program reads of /proc/<pid>/stat.
type stat struct {
	comm string
	ppid int
	cpu  time.Duration // utime + stime
}

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux this runs on.
const clockTick = 10 * time.Millisecond

func readStat(pid int) (stat, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	// The command sits in parentheses and may hold spaces; the fields after it are numbers (proc(5)).
	open, closing := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || closing < open {
		return stat{}, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	fields := strings.Fields(string(raw[closing+1:]))
	if len(fields) < 13 {
		return stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	// fields[0] is the state (field 3); ppid is field 4, utime 14, stime 15.
	ppid, err1 := strconv.Atoi(fields[1])
	utime, err2 := strconv.ParseInt(fields[11], 10, 64)
	stime, err3 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return stat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return stat{comm: string(raw[open+1 : closing]), ppid: ppid, cpu: time.Duration(utime+stime) * clockTick}, nil
}

// peakRSS is the process's VmHWM in bytes.
func peakRSS(pid int) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

// snapshot is the counters at one moment.
type snapshot struct {
	cpu  map[string]time.Duration // by process name
	peak map[string]int64         // VmHWM, by process name
	// kube is each management cluster's apiserver_request_total, by resource.
	kube         map[string]map[string]float64
	apiLogOffset int64
}

func takeSnapshot(ctx context.Context, procs []process, mcs []managementCluster, apiLog string) (snapshot, error) {
	s := snapshot{cpu: map[string]time.Duration{}, peak: map[string]int64{}, kube: map[string]map[string]float64{}}
	info, err := os.Stat(apiLog)
	if err != nil {
		return s, fmt.Errorf("the API's log: %w", err)
	}
	s.apiLogOffset = info.Size()
	for _, p := range procs {
		st, err := readStat(p.pid)
		if err != nil {
			return s, fmt.Errorf("%s (pid %d) is gone: %w", p.name, p.pid, err)
		}
		s.cpu[p.name] = st.cpu
		if s.peak[p.name], err = peakRSS(p.pid); err != nil {
			return s, err
		}
	}
	for _, mc := range mcs {
		if s.kube[mc.name], err = mc.requests(ctx); err != nil {
			return s, err
		}
	}
	return s, nil
}

// managementCluster is one management cluster's kube-apiserver, read with the admin kubeconfig hyperfleet-dev
// wrote for the applier.
type managementCluster struct {
	name   string
	client *http.Client
	host   string
}

func newManagementClusters(dir string) ([]managementCluster, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("the management clusters' kubeconfigs: %w", err)
	}
	var out []managementCluster
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("management cluster %s: %w", e.Name(), err)
		}
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("management cluster %s: %w", e.Name(), err)
		}
		out = append(out, managementCluster{name: e.Name(), client: client, host: strings.TrimSuffix(cfg.Host, "/")})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no kubeconfig in %s", dir)
	}
	return out, nil
}

// requestTotal matches apiserver_request_total's samples; the resource label is what the table sorts by.
var (
	requestTotal  = regexp.MustCompile(`^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$`)
	resourceLabel = regexp.MustCompile(`(?:^|,)resource="([^"]*)"`)
)

// requests reads the kube-apiserver's apiserver_request_total, summed by resource. Its own reads of /metrics
// count as "" (no resource), with the kube-apiserver's other non-resource requests.
func (m managementCluster) requests(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.host+"/metrics", http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("management cluster %s /metrics: %w", m.name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("management cluster %s /metrics: %s", m.name, resp.Status)
	}
	out := map[string]float64{}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		sample := requestTotal.FindStringSubmatch(lines.Text())
		if sample == nil {
			continue
		}
		v, err := strconv.ParseFloat(sample[2], 64)
		if err != nil {
			return nil, fmt.Errorf("management cluster %s: %q: %w", m.name, lines.Text(), err)
		}
		resource := ""
		if r := resourceLabel.FindStringSubmatch(sample[1]); r != nil {
			resource = r[1]
		}
		out[resource] += v
	}
	return out, lines.Err()
}

// hivelocityLog is hivelocity-sim's request log.
type hivelocityLog struct {
	url    string
	client *http.Client
}

func (h *hivelocityLog) reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, h.url+"/_sim/requests", http.NoBody)
	if err != nil {
		return err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("hivelocity-sim: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("hivelocity-sim: DELETE /_sim/requests: %s", resp.Status)
	}
	return nil
}

// read returns the calls since reset, by operation.
func (h *hivelocityLog) read(ctx context.Context) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url+"/_sim/requests", http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("hivelocity-sim: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("hivelocity-sim: GET /_sim/requests: %s", resp.Status)
	}
	var calls []struct {
		Op string `json:"op"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&calls); err != nil {
		return nil, fmt.Errorf("hivelocity-sim: /_sim/requests: %w", err)
	}
	out := map[string]int{}
	for _, c := range calls {
		out[c.Op]++
	}
	return out, nil
}

// request is one line of the API's request log, as far as the table needs it.
type request struct {
	Msg       string `json:"msg"`
	RequestID string `json:"request_id"`
	Method    string `json:"method"`
	Route     string `json:"route"`
	Identity  string `json:"identity"`
}

// caller is a caller's requests, by "METHOD route".
type caller map[string]int

// self is this program as a caller: its requests, told by their request ids.
const self = "(this program)"

// readRequests counts the requests the API logged between two offsets of its log, by caller and route. A line is
// the API's JSON log record, possibly after a prefix.
func readRequests(path string, from, to int64) (map[string]caller, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	out := map[string]caller{}
	lines := bufio.NewScanner(io.LimitReader(f, to-from))
	lines.Buffer(make([]byte, 64<<10), 4<<20)
	for lines.Scan() {
		line := lines.Bytes()
		i := bytes.IndexByte(line, '{')
		if i < 0 {
			continue
		}
		var r request
		if json.Unmarshal(line[i:], &r) != nil || r.Msg != "request" {
			continue
		}
		who := r.Identity
		if strings.HasPrefix(r.RequestID, selfRequestID) {
			who = self
		}
		if out[who] == nil {
			out[who] = caller{}
		}
		out[who][r.Method+" "+strings.TrimPrefix(r.Route, "/api/hyperfleet/v1")]++
	}
	return out, lines.Err()
}
