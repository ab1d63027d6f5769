package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	openapitypes "github.com/oapi-codegen/runtime/types"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// staleReport is the code of a status report of an older generation than the one the API holds: an expected
// answer when reports of several generations race, not a failure. (Reports of one generation are all accepted: the
// one the API receives last wins.)
const staleReport = "HYPERFLEET-STS-001"

type config struct {
	url         string
	token       string
	clusters    int
	streams     int
	requests    int
	concurrency int
	phaseLimit  time.Duration
	prefix      string
	phases      map[string]bool
	adapters    []string
	// metrics is the API's /metrics, for its CPU time and memory; nil or empty URL: not measured.
	metrics *apiProcess
	// db is the database's backends, for PostgreSQL's CPU time; nil: not measured.
	db *dbBackends
	// out receives the measurements, errs the first failures of each phase.
	out, errs io.Writer
}

// answer is what one request got: its HTTP status and, for a problem, its code.
type answer struct {
	status int
	code   string
}

// result is one phase's measurements.
type result struct {
	name string
	// ok counts the answers with the phase's status, stale the stale reports. latencies holds both: the server
	// answered each as it should, and the clients waited for each.
	ok, stale int
	latencies []time.Duration
	failures  int64
	elapsed   time.Duration
	// cpu is the API process's CPU time over the phase, rss its resident memory at the end; zero when not measured.
	cpu time.Duration
	rss int64
	// dbCPU is the database backends' CPU time over the phase, when dbMeasured.
	dbCPU      time.Duration
	dbMeasured bool
}

func (r result) print(w io.Writer) {
	slices.Sort(r.latencies)
	pct := func(p float64) time.Duration {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))]
	}
	cpu := "       -"
	if answered := len(r.latencies) + int(r.failures); r.cpu > 0 && answered > 0 {
		cpu = fmt.Sprintf("%8.3f", float64(r.cpu.Microseconds())/1000/float64(answered))
	}
	rss := "    -"
	if r.rss > 0 {
		rss = fmt.Sprintf("%5d", r.rss>>20)
	}
	db := ""
	if answered := len(r.latencies) + int(r.failures); r.dbMeasured && answered > 0 {
		db = fmt.Sprintf("   DB %8.3f ms CPU/req", float64(r.dbCPU.Microseconds())/1000/float64(answered))
	}
	fmt.Fprintf(w, "%-8s %7d ok %5d stale %5d failed %9.0f req/s   p50 %8s   p99 %8s   API %s ms CPU/req  %s MiB RSS%s\n", r.name, r.ok, r.stale, r.failures,
		float64(len(r.latencies))/r.elapsed.Seconds(), pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), cpu, rss, db)
}

// phase runs n calls of op over the configured clients and sorts their answers: want is success, a stale report
// is expected, anything else (an error included) is a failure.
func phase(ctx context.Context, cfg config, name string, n int, op func(ctx context.Context, i int) (answer, error), want int) result {
	ctx, cancel := context.WithTimeout(ctx, cfg.phaseLimit)
	defer cancel()
	var next atomic.Int64
	var failures atomic.Int64
	type tally struct {
		ok, stale int
		latencies []time.Duration
	}
	perWorker := make([]tally, cfg.concurrency)
	var wg sync.WaitGroup
	before := cfg.metrics.sample(ctx)
	dbWatch := cfg.db.watch(ctx)
	start := time.Now()
	for w := range cfg.concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				got, err := op(ctx, i)
				d := time.Since(t0)
				switch {
				case err == nil && got.status == want:
					perWorker[w].ok++
				case err == nil && got.status == http.StatusConflict && got.code == staleReport:
					perWorker[w].stale++
				default:
					if ctx.Err() != nil {
						return // the phase limit cut this request short: not the server's failure
					}
					if failures.Add(1) <= 3 {
						fmt.Fprintf(cfg.errs, "%s #%d: status %d %s, error %v\n", name, i, got.status, got.code, err)
					}
					continue
				}
				perWorker[w].latencies = append(perWorker[w].latencies, d)
			}
		})
	}
	wg.Wait()
	r := result{name: name, failures: failures.Load(), elapsed: time.Since(start)}
	if dbWatch != nil {
		r.dbCPU, r.dbMeasured = dbWatch.end(context.WithoutCancel(ctx)), true
	}
	if after := cfg.metrics.sample(context.WithoutCancel(ctx)); before.ok && after.ok {
		r.cpu, r.rss = after.cpu-before.cpu, after.rss
	}
	for _, t := range perWorker {
		r.ok += t.ok
		r.stale += t.stale
		r.latencies = append(r.latencies, t.latencies...)
	}
	if answered := r.ok + r.stale + int(r.failures); answered < n && ctx.Err() != nil {
		fmt.Fprintf(cfg.errs, "%s: stopped after %d of %d requests (--phase-limit %s, or interrupted)\n", name, answered, n, cfg.phaseLimit)
	}
	return r
}

func run(ctx context.Context, cfg config) error {
	transport := &http.Transport{MaxIdleConnsPerHost: cfg.concurrency * 2, MaxConnsPerHost: cfg.concurrency * 2}
	defer transport.CloseIdleConnections()
	opts := []api.ClientOption{api.WithHTTPClient(&http.Client{Transport: transport, Timeout: 30 * time.Second})}
	if cfg.token != "" {
		opts = append(opts, api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+cfg.token)
			return nil
		}))
	}
	gen, err := api.NewClient(cfg.url, opts...)
	if err != nil {
		return fmt.Errorf("client for %s: %w", cfg.url, err)
	}
	client := &loadClient{Client: gen, kinds: api.Kinds()}
	info, err := (&api.ClientWithResponses{ClientInterface: gen}).GetAPIInfoWithResponse(ctx)
	if err != nil {
		return fmt.Errorf("no hyperfleet-api at %s (start one with `make run`): %w", cfg.url, err)
	}
	if info.JSON200 == nil {
		return fmt.Errorf("no hyperfleet-api at %s (start one with `make run`): %d %s", cfg.url, info.StatusCode(), info.Body)
	}
	if err := checkAccess(ctx, cfg, client); err != nil {
		return err
	}
	fmt.Fprintf(cfg.out, "hyperfleet-api %s at %s — %d clients, %d clusters, %d requests per read phase; %s%s\n",
		info.JSON200.Version, cfg.url, cfg.concurrency, cfg.clusters, cfg.requests, cfg.metrics.describe(ctx), cfg.db.describe(ctx))

	var failed int64
	record := func(r result) {
		r.print(cfg.out)
		failed += r.failures
	}
	if err := streamPhases(ctx, cfg, client, record); err != nil {
		return err
	}
	if slices.ContainsFunc([]string{"create", "get", "list", "walk", "search", "status", "settle", "unchanged", "poll"}, func(p string) bool { return cfg.phases[p] }) {
		if err := clusterPhases(ctx, cfg, client, record); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d requests failed (the first of each phase are above)", failed)
	}
	return nil
}

// checkAccess asks for one page the load needs, so that a missing or refused token is one clear error rather than
// every request of every phase failing.
func checkAccess(ctx context.Context, cfg config, client *loadClient) error {
	resp, err := api.ReadAnswer[api.ResourceList](client.ListResources(ctx, client.kinds.VersionStream, uuid.Nil, &api.ListParams{Size: ptr(1)}))
	if err != nil {
		return fmt.Errorf("list version streams: %w", err)
	}
	switch {
	case resp.StatusCode() == http.StatusUnauthorized && cfg.token == "":
		return fmt.Errorf("the API at %s needs a bearer token: give --token-file or $%s (make bench mints one)", cfg.url, envToken)
	case resp.StatusCode() == http.StatusUnauthorized:
		return fmt.Errorf("the API at %s refused the token: %s", cfg.url, problemDetail(resp.Body))
	case resp.StatusCode() == http.StatusForbidden:
		return fmt.Errorf("the token's role may not read version streams at %s: %s", cfg.url, problemDetail(resp.Body))
	case resp.StatusCode() != http.StatusOK:
		return fmt.Errorf("list version streams at %s: %d %s", cfg.url, resp.StatusCode(), resp.Body)
	}
	return nil
}

// clusterPhases creates (or finds) the clusters and runs the phases that work on them.
func clusterPhases(ctx context.Context, cfg config, client *loadClient, record func(result)) error {
	ids, err := createPhase(ctx, cfg, client, record)
	if err != nil {
		return err
	}
	pages := max(1, len(ids)/100)
	envs := []string{"prod", "staging", "dev", "test"}
	type namedPhase struct {
		name string
		op   func(ctx context.Context, i int) (answer, error)
		n    int
	}
	cursors := make(chan string, cfg.concurrency)
	settled := map[string]any{"load": true}
	all := []namedPhase{
		// Read phases read the body but do not decode it: they measure the server, not this client's JSON.
		{"get", func(ctx context.Context, _ int) (answer, error) {
			return drain(client.GetResource(ctx, client.kinds.Cluster, api.ResourceRef{ID: ids[rand.IntN(len(ids))]})) //nolint:bodyclose // drain closes it
		}, cfg.requests},
		{"list", func(ctx context.Context, _ int) (answer, error) {
			return drain(client.ListResources(ctx, client.kinds.Cluster, uuid.Nil, &api.ListParams{Page: ptr(1 + rand.IntN(pages)), Size: ptr(100)})) //nolint:bodyclose // drain closes it
		}, cfg.requests},
		{"walk", func(ctx context.Context, _ int) (answer, error) {
			// Each request continues a walk where an earlier one stopped (or starts one), by cursor and without
			// counting: the way a client reads a whole large list, at any depth.
			var after *string
			select {
			case c := <-cursors:
				after = &c
			default:
			}
			got, next, err := drainNext(client.ListResources(ctx, client.kinds.Cluster, uuid.Nil, &api.ListParams{After: after, Count: ptr(false), Size: ptr(100)})) //nolint:bodyclose // drainNext closes it
			if next != "" {
				cursors <- next // never blocks: at most one per client in flight
			}
			return got, err
		}, cfg.requests},
		{"search", func(ctx context.Context, _ int) (answer, error) {
			// One env in four matches a shard, so a quarter of searches return 100 clusters, the rest none.
			q := fmt.Sprintf("labels.env = '%s' and labels.shard = '%d'", envs[rand.IntN(len(envs))], rand.IntN(100))
			return drain(client.ListResources(ctx, client.kinds.Cluster, uuid.Nil, &api.ListParams{Search: &q, Size: ptr(100)})) //nolint:bodyclose // drain closes it
		}, cfg.requests},
		// Each status report says something new (its data names the request), so every one is a write: the API
		// stores nothing for a report that repeats the stored one, which the unchanged phase measures.
		{"status", func(ctx context.Context, i int) (answer, error) {
			return report(ctx, client, ids[rand.IntN(len(ids))], cfg.adapters[rand.IntN(len(cfg.adapters))], time.Now(), map[string]any{"load": i})
		}, cfg.requests},
		{"settle", func(ctx context.Context, i int) (answer, error) {
			return report(ctx, client, ids[i], cfg.adapters[0], time.Now(), settled)
		}, len(ids)},
		{"unchanged", func(ctx context.Context, _ int) (answer, error) {
			return report(ctx, client, ids[rand.IntN(len(ids))], cfg.adapters[0], time.Now(), settled)
		}, cfg.requests},
		{"poll", func(ctx context.Context, _ int) (answer, error) {
			return drain(client.ListResources(ctx, client.kinds.Cluster, uuid.Nil, &api.ListParams{PendingFor: &cfg.adapters[0], ResyncAfter: ptr("1h"), Size: ptr(100)})) //nolint:bodyclose // drain closes it
		}, cfg.requests},
	}
	for _, p := range all {
		if cfg.phases[p.name] {
			record(phase(ctx, cfg, p.name, p.n, p.op, http.StatusOK))
		}
	}
	return nil
}

// report posts a healthy status report about cluster id as adapter, observed at observed, with data. A first
// report is 201 and later ones 200; both are the same upsert, so both count as 200.
func report(ctx context.Context, client *loadClient, id openapitypes.UUID, adapter string, observed time.Time, data map[string]any) (answer, error) {
	resp, err := api.ReadAnswer[api.AdapterStatus](client.PutResourceStatus(ctx, client.kinds.Cluster, api.ResourceRef{ID: id}, api.AdapterStatusReport{
		Adapter: adapter, ObservedGeneration: 1, ObservedTime: observed.UTC(),
		Conditions: []api.ReportedCondition{{Type: "Available", Status: "True"}, {Type: "Health", Status: "True"}},
		Data:       &data,
	}))
	if err != nil {
		return answer{}, err
	}
	if resp.StatusCode() == http.StatusCreated {
		return answer{status: http.StatusOK}, nil
	}
	return answer{status: resp.StatusCode(), code: problemCode(resp.Body)}, nil
}

// createPhase creates the clusters (when the create phase is on) or pages through the existing ones.
func createPhase(ctx context.Context, cfg config, client *loadClient, record func(result)) ([]openapitypes.UUID, error) {
	if !cfg.phases["create"] {
		var ids []openapitypes.UUID
		for page := 1; len(ids) < cfg.clusters; page++ {
			resp, err := api.ReadAnswer[api.SparseList](client.ListResources(ctx, client.kinds.Cluster, uuid.Nil,
				&api.ListParams{Page: ptr(page), Size: ptr(500), Fields: ptr("id")}))
			if err != nil {
				return nil, fmt.Errorf("list clusters: %w", err)
			}
			sparse := resp.JSON200
			if sparse == nil {
				return nil, fmt.Errorf("list clusters: %d %s", resp.StatusCode(), resp.Body)
			}
			for i := range sparse.Items {
				ids = append(ids, sparse.Items[i].Id)
			}
			if len(sparse.Items) < 500 {
				break
			}
		}
		if len(ids) == 0 {
			return nil, errors.New("no clusters to work on: add the create phase")
		}
		return ids[:min(len(ids), cfg.clusters)], nil
	}
	if err := ensureStream(ctx, client, loadStream); err != nil {
		return nil, err
	}
	ids := make([]openapitypes.UUID, cfg.clusters)
	envs := []string{"prod", "staging", "dev", "test"}
	record(phase(ctx, cfg, "create", cfg.clusters, func(ctx context.Context, i int) (answer, error) {
		labels := api.Labels{"env": envs[i%len(envs)], "shard": fmt.Sprint(i % 100)}
		resp, err := api.ReadAnswer[api.Resource](client.CreateResource(ctx, client.kinds.Cluster, uuid.Nil, api.ResourceCreate{
			Name: fmt.Sprintf("%s-%d", cfg.prefix, i), Labels: &labels,
			Spec: map[string]any{"version_stream": loadStream},
		}))
		if err != nil {
			return answer{}, err
		}
		if resp.JSON200 != nil {
			ids[i] = resp.JSON200.Id
		}
		return answer{status: resp.StatusCode(), code: problemCode(resp.Body)}, nil
	}, http.StatusCreated))
	live := slices.DeleteFunc(ids, func(id openapitypes.UUID) bool { return id == openapitypes.UUID{} })
	if len(live) == 0 {
		return nil, errors.New("no cluster was created")
	}
	return live, nil
}

// streamPhases creates the load's version streams and waits for them to be resolved, as asked.
func streamPhases(ctx context.Context, cfg config, client *loadClient, record func(result)) error {
	minors := []string{"4.15", "4.16", "4.17"}
	groups := []string{"stable", "fast"}
	if cfg.phases["streams"] {
		record(phase(ctx, cfg, "streams", cfg.streams, func(ctx context.Context, i int) (answer, error) {
			resp, err := api.ReadAnswer[api.Resource](client.CreateResource(ctx, client.kinds.VersionStream, uuid.Nil, api.ResourceCreate{
				Name: fmt.Sprintf("%s-s%d", cfg.prefix, i),
				Spec: map[string]any{"target_version": minors[i%len(minors)], "channel_group": groups[i/len(minors)%len(groups)]},
			}))
			if err != nil {
				return answer{}, err
			}
			return answer{status: resp.StatusCode(), code: problemCode(resp.Body)}, nil
		}, http.StatusCreated))
	}
	if !cfg.phases["resolved"] {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.phaseLimit)
	defer cancel()
	query := fmt.Sprintf("name like '%s-s%%' and status.phase = 'Ready'", cfg.prefix)
	start := time.Now()
	for {
		resp, err := api.ReadAnswer[api.ResourceList](client.ListResources(ctx, client.kinds.VersionStream, uuid.Nil, &api.ListParams{Search: &query, Size: ptr(1)}))
		if err != nil {
			return fmt.Errorf("count resolved streams: %w", err)
		}
		if resp.JSON200 == nil {
			return fmt.Errorf("count resolved streams: %d %s", resp.StatusCode(), resp.Body)
		}
		ready := deref(resp.JSON200.Total) // counted: count=false is not asked for
		elapsed := time.Since(start)
		if ready >= int64(cfg.streams) {
			fmt.Fprintf(cfg.out, "%-8s %7d streams Ready after %s: %.0f streams/s\n", "resolved", ready, elapsed.Round(10*time.Millisecond), float64(ready)/elapsed.Seconds())
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d streams were Ready after %s (is version-resolver running, and are streams a required adapter's?)", ready, cfg.streams, elapsed.Round(time.Second))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// loadClient is the generic client with the kinds the load works on.
type loadClient struct {
	*api.Client
	kinds *api.KindTable
}

// loadStream is the VersionStream the load's clusters name.
const loadStream = "load-4-16"

// ensureStream creates the named stream unless it exists.
func ensureStream(ctx context.Context, client *loadClient, name string) error {
	resp, err := api.ReadAnswer[api.Resource](client.CreateResource(ctx, client.kinds.VersionStream, uuid.Nil,
		api.ResourceCreate{Name: name, Spec: map[string]any{"target_version": "4.16"}}))
	if err != nil {
		return fmt.Errorf("create version stream %s: %w", name, err)
	}
	if resp.StatusCode() != http.StatusCreated && resp.StatusCode() != http.StatusConflict {
		return fmt.Errorf("create version stream %s: %d %s", name, resp.StatusCode(), resp.Body)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// drain reads a response to its end and returns its status, and its problem code when it is one.
func drain(resp *http.Response, err error) (answer, error) {
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < http.StatusBadRequest {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return answer{}, fmt.Errorf("read body: %w", err)
		}
		return answer{status: resp.StatusCode}, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return answer{}, fmt.Errorf("read body: %w", err)
	}
	return answer{status: resp.StatusCode, code: problemCode(body)}, nil
}

// drainNext is drain for a list page, also returning the page's `next` cursor ("" on the last page). It finds
// the cursor without decoding the page: the API writes `next` once, in the envelope after the items.
func drainNext(resp *http.Response, err error) (answer, string, error) {
	if err != nil {
		return answer{}, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, "", fmt.Errorf("read body: %w", err)
	}
	if resp.StatusCode >= http.StatusBadRequest {
		return answer{status: resp.StatusCode, code: problemCode(body)}, "", nil
	}
	next := ""
	const key = `"next":"`
	if i := bytes.LastIndex(body, []byte(key)); i >= 0 {
		rest := body[i+len(key):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			next = string(rest[:j])
		}
	}
	return answer{status: resp.StatusCode}, next, nil
}

// problemCode returns the code of a problem+json body, or "".
func problemCode(body []byte) string {
	var p struct{ Code string }
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) || json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.Code
}

// problemDetail returns what a problem+json body says, or the body.
func problemDetail(body []byte) string {
	var p struct{ Code, Detail string }
	if json.Unmarshal(body, &p) != nil || p.Code == "" {
		return strings.TrimSpace(string(body))
	}
	return p.Code + ": " + p.Detail
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
