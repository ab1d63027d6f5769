// Command hyperfleet-load measures a running hyperfleet-api: create, get, list (size 100) and label-search
// throughput with p50/p99 latency, from a fixed number of concurrent clients. Every phase is bounded by a request
// count and a time limit, so a run always ends.
//
//	hyperfleet-load --url http://127.0.0.1:8000 --clusters 10000 --concurrency 8
//
// The status, settle and poll phases act as adapters: status posts reports from --adapters at random over the
// created clusters (start the API with those as required adapters to measure aggregation too); settle posts one
// report per cluster from the first adapter; poll measures that adapter's idle `pending_for` query.
//
// The streams phase creates --streams VersionStreams; resolved then waits until a running version-resolver has
// made every one of them Ready and prints how many it resolved per second (start the resolver after streams).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	openapitypes "github.com/oapi-codegen/runtime/types"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

type config struct {
	url         string
	clusters    int
	streams     int
	requests    int
	concurrency int
	phaseLimit  time.Duration
	prefix      string
	phases      map[string]bool
	adapters    []string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.url, "url", "http://127.0.0.1:8000", "API base URL")
	flag.IntVar(&cfg.clusters, "clusters", 10000, "clusters to create (the create phase; the data set of the others)")
	flag.IntVar(&cfg.streams, "streams", 10000, "version streams the streams phase creates")
	flag.IntVar(&cfg.requests, "requests", 5000, "requests in each of the get, list and search phases")
	flag.IntVar(&cfg.concurrency, "concurrency", 8, "concurrent clients")
	flag.DurationVar(&cfg.phaseLimit, "phase-limit", 2*time.Minute, "longest a phase may run")
	flag.StringVar(&cfg.prefix, "prefix", fmt.Sprintf("load-%d", time.Now().Unix()%100000), "cluster name prefix (names must be new)")
	phases := flag.String("phases", "create,get,list,search", "phases to run, in this order: streams,resolved,create,get,list,search,status,settle,poll")
	adapters := flag.String("adapters", "load-a,load-b,load-c", "adapter names the status phases report as")
	flag.Parse()
	cfg.phases = map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		cfg.phases[strings.TrimSpace(p)] = true
	}
	cfg.adapters = strings.Split(*adapters, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hyperfleet-load:", err)
		os.Exit(1)
	}
}

// result is one phase's measurements.
type result struct {
	name      string
	latencies []time.Duration
	failures  int64
	elapsed   time.Duration
}

func (r result) print() {
	slices.Sort(r.latencies)
	pct := func(p float64) time.Duration {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))]
	}
	fmt.Printf("%-8s %7d ok %5d failed %9.0f req/s   p50 %8s   p99 %8s\n", r.name, len(r.latencies), r.failures,
		float64(len(r.latencies))/r.elapsed.Seconds(), pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond))
}

// phase runs n calls of op over the configured clients; op returns the HTTP status it got.
func phase(ctx context.Context, cfg config, name string, n int, op func(ctx context.Context, i int) (int, error), want int) result {
	ctx, cancel := context.WithTimeout(ctx, cfg.phaseLimit)
	defer cancel()
	var next atomic.Int64
	var failures atomic.Int64
	perWorker := make([][]time.Duration, cfg.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range cfg.concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				status, err := op(ctx, i)
				d := time.Since(t0)
				if err != nil || status != want {
					if failures.Add(1) <= 3 {
						fmt.Fprintf(os.Stderr, "%s #%d: status %d, error %v\n", name, i, status, err)
					}
					continue
				}
				perWorker[w] = append(perWorker[w], d)
			}
		})
	}
	wg.Wait()
	r := result{name: name, failures: failures.Load(), elapsed: time.Since(start)}
	for _, l := range perWorker {
		r.latencies = append(r.latencies, l...)
	}
	return r
}

func run(ctx context.Context, cfg config) error {
	if cfg.concurrency < 1 || cfg.clusters < 1 || cfg.requests < 1 {
		return fmt.Errorf("--concurrency, --clusters and --requests must be positive")
	}
	transport := &http.Transport{MaxIdleConnsPerHost: cfg.concurrency * 2, MaxConnsPerHost: cfg.concurrency * 2}
	client, err := api.NewClientWithResponses(cfg.url, api.WithHTTPClient(&http.Client{Transport: transport, Timeout: 30 * time.Second}))
	if err != nil {
		return err
	}
	info, err := client.GetAPIInfoWithResponse(ctx)
	if err != nil {
		return fmt.Errorf("no hyperfleet-api at %s (start one with `make run`): %w", cfg.url, err)
	}
	if info.JSON200 == nil {
		return fmt.Errorf("no hyperfleet-api at %s (start one with `make run`): %d %s", cfg.url, info.StatusCode(), info.Body)
	}
	fmt.Printf("hyperfleet-api %s at %s — %d clients, %d clusters, %d requests per read phase\n",
		info.JSON200.Version, cfg.url, cfg.concurrency, cfg.clusters, cfg.requests)

	if err := streamPhases(ctx, cfg, client); err != nil {
		return err
	}
	if !slices.ContainsFunc([]string{"create", "get", "list", "search", "status", "settle", "poll"}, func(p string) bool { return cfg.phases[p] }) {
		return nil
	}
	ids, err := createPhase(ctx, cfg, client)
	if err != nil {
		return err
	}
	pages := max(1, len(ids)/100)
	envs := []string{"prod", "staging", "dev", "test"}
	status := func(ctx context.Context, id openapitypes.UUID, adapter string) (int, error) {
		resp, err := client.PostClusterStatusWithResponse(ctx, id, api.AdapterStatusReport{
			Adapter: adapter, ObservedGeneration: 1, ObservedTime: time.Now().UTC(),
			Conditions: []api.ReportedCondition{{Type: "Available", Status: "True"}, {Type: "Health", Status: "True"}},
			Data:       &map[string]interface{}{"load": true},
		})
		if err != nil {
			return 0, err
		}
		if resp.StatusCode() == http.StatusCreated {
			return http.StatusOK, nil
		}
		return resp.StatusCode(), nil
	}
	type namedPhase struct {
		name string
		op   func(ctx context.Context, i int) (int, error)
		n    int
	}
	all := []namedPhase{
		// Read phases read the body but do not decode it: they measure the server, not this client's JSON.
		{"get", func(ctx context.Context, _ int) (int, error) {
			return drain(client.GetCluster(ctx, ids[rand.IntN(len(ids))])) //nolint:bodyclose // drain closes it
		}, cfg.requests},
		{"list", func(ctx context.Context, _ int) (int, error) {
			return drain(client.ListClusters(ctx, &api.ListClustersParams{Page: ptr(1 + rand.IntN(pages)), Size: ptr(100)})) //nolint:bodyclose // drain closes it
		}, cfg.requests},
		{"search", func(ctx context.Context, _ int) (int, error) {
			// One env in four matches a shard, so a quarter of searches return 100 clusters, the rest none.
			q := fmt.Sprintf("labels.env = '%s' and labels.shard = '%d'", envs[rand.IntN(len(envs))], rand.IntN(100))
			return drain(client.ListClusters(ctx, &api.ListClustersParams{Search: &q, Size: ptr(100)})) //nolint:bodyclose // drain closes it
		}, cfg.requests},
		{"status", func(ctx context.Context, _ int) (int, error) {
			return status(ctx, ids[rand.IntN(len(ids))], cfg.adapters[rand.IntN(len(cfg.adapters))])
		}, cfg.requests},
		{"settle", func(ctx context.Context, i int) (int, error) {
			return status(ctx, ids[i], cfg.adapters[0])
		}, len(ids)},
		{"poll", func(ctx context.Context, _ int) (int, error) {
			return drain(client.ListClusters(ctx, &api.ListClustersParams{PendingFor: &cfg.adapters[0], ResyncAfter: ptr("1h"), Size: ptr(100)})) //nolint:bodyclose // drain closes it
		}, cfg.requests},
	}
	for i := range all {
		if p := &all[i]; cfg.phases[p.name] {
			phase(ctx, cfg, p.name, p.n, p.op, http.StatusOK).print()
		}
	}
	return nil
}

// createPhase creates the clusters (when the create phase is on) or pages through the existing ones.
func createPhase(ctx context.Context, cfg config, client *api.ClientWithResponses) ([]openapitypes.UUID, error) {
	if !cfg.phases["create"] {
		var ids []openapitypes.UUID
		for page := 1; len(ids) < cfg.clusters; page++ {
			resp, err := client.ListClustersWithResponse(ctx, &api.ListClustersParams{Page: ptr(page), Size: ptr(500), Fields: ptr("id")})
			if err != nil {
				return nil, fmt.Errorf("list clusters: %w", err)
			}
			sparse := resp.ApplicationvndHyperfleetSparseJSON200
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
			return nil, fmt.Errorf("no clusters to work on: add the create phase")
		}
		return ids[:min(len(ids), cfg.clusters)], nil
	}
	if err := ensureStream(ctx, client, loadStream); err != nil {
		return nil, err
	}
	ids := make([]openapitypes.UUID, cfg.clusters)
	envs := []string{"prod", "staging", "dev", "test"}
	create := phase(ctx, cfg, "create", cfg.clusters, func(ctx context.Context, i int) (int, error) {
		labels := api.Labels{"env": envs[i%len(envs)], "shard": fmt.Sprint(i % 100)}
		resp, err := client.CreateClusterWithResponse(ctx, api.ClusterCreate{
			Name: fmt.Sprintf("%s-%d", cfg.prefix, i), Labels: &labels,
			Spec: api.ClusterSpec{VersionStream: loadStream},
		})
		if err != nil {
			return 0, err
		}
		if resp.JSON201 != nil {
			ids[i] = resp.JSON201.Id
		}
		return resp.StatusCode(), nil
	}, http.StatusCreated)
	create.print()
	live := slices.DeleteFunc(ids, func(id openapitypes.UUID) bool { return id == openapitypes.UUID{} })
	if len(live) == 0 {
		return nil, fmt.Errorf("no cluster was created")
	}
	return live, nil
}

// streamPhases creates the load's version streams and waits for them to be resolved, as asked.
func streamPhases(ctx context.Context, cfg config, client *api.ClientWithResponses) error {
	minors := []string{"4.15", "4.16", "4.17"}
	groups := []api.VersionStreamSpecChannelGroup{api.VersionStreamSpecChannelGroupStable, api.VersionStreamSpecChannelGroupFast}
	if cfg.phases["streams"] {
		phase(ctx, cfg, "streams", cfg.streams, func(ctx context.Context, i int) (int, error) {
			resp, err := client.CreateVersionStreamWithResponse(ctx, api.VersionStreamCreate{
				Name: fmt.Sprintf("%s-s%d", cfg.prefix, i),
				Spec: api.VersionStreamSpec{TargetVersion: minors[i%len(minors)], ChannelGroup: &groups[i/len(minors)%len(groups)]},
			})
			if err != nil {
				return 0, err
			}
			return resp.StatusCode(), nil
		}, http.StatusCreated).print()
	}
	if !cfg.phases["resolved"] {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.phaseLimit)
	defer cancel()
	query := fmt.Sprintf("name like '%s-s%%' and status.phase = 'Ready'", cfg.prefix)
	start := time.Now()
	for {
		resp, err := client.ListVersionStreamsWithResponse(ctx, &api.ListVersionStreamsParams{Search: &query, Size: ptr(1)})
		if err != nil {
			return fmt.Errorf("count resolved streams: %w", err)
		}
		if resp.JSON200 == nil {
			return fmt.Errorf("count resolved streams: %d %s", resp.StatusCode(), resp.Body)
		}
		ready := resp.JSON200.Total
		elapsed := time.Since(start)
		if ready >= int64(cfg.streams) {
			fmt.Printf("%-8s %7d streams Ready after %s: %.0f streams/s\n", "resolved", ready, elapsed.Round(10*time.Millisecond), float64(ready)/elapsed.Seconds())
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d streams were Ready after %s (is version-resolver running, and are streams a required adapter's?)", ready, cfg.streams, elapsed.Round(time.Second))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// loadStream is the VersionStream the load's clusters name.
const loadStream = "load-4-16"

// ensureStream creates the named stream unless it exists.
func ensureStream(ctx context.Context, client *api.ClientWithResponses, name string) error {
	resp, err := client.CreateVersionStreamWithResponse(ctx, api.VersionStreamCreate{Name: name, Spec: api.VersionStreamSpec{TargetVersion: "4.16"}})
	if err != nil {
		return fmt.Errorf("create version stream %s: %w", name, err)
	}
	if resp.StatusCode() != http.StatusCreated && resp.StatusCode() != http.StatusConflict {
		return fmt.Errorf("create version stream %s: %d %s", name, resp.StatusCode(), resp.Body)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// drain reads a response to its end and returns its status.
func drain(resp *http.Response, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}
