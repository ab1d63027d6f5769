// Command hyperfleet-load measures a running hyperfleet-api: create, get, list (size 100) and label-search
// throughput with p50/p99 latency, from a fixed number of concurrent clients. Every phase is bounded by a request
// count and a time limit, so a run always ends.
//
//	hyperfleet-load --url http://127.0.0.1:8000 --clusters 10000 --concurrency 8
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"slices"
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
	requests    int
	concurrency int
	phaseLimit  time.Duration
	prefix      string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.url, "url", "http://127.0.0.1:8000", "API base URL")
	flag.IntVar(&cfg.clusters, "clusters", 10000, "clusters to create (the create phase; the data set of the others)")
	flag.IntVar(&cfg.requests, "requests", 5000, "requests in each of the get, list and search phases")
	flag.IntVar(&cfg.concurrency, "concurrency", 8, "concurrent clients")
	flag.DurationVar(&cfg.phaseLimit, "phase-limit", 2*time.Minute, "longest a phase may run")
	flag.StringVar(&cfg.prefix, "prefix", fmt.Sprintf("load-%d", time.Now().Unix()%100000), "cluster name prefix (names must be new)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
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
	if err != nil || info.JSON200 == nil {
		return fmt.Errorf("no hyperfleet-api at %s (start one with `make run`): %v", cfg.url, err)
	}
	fmt.Printf("hyperfleet-api %s at %s — %d clients, %d clusters, %d requests per read phase\n",
		info.JSON200.Version, cfg.url, cfg.concurrency, cfg.clusters, cfg.requests)

	ids := make([]openapitypes.UUID, cfg.clusters)
	envs := []string{"prod", "staging", "dev", "test"}
	create := phase(ctx, cfg, "create", cfg.clusters, func(ctx context.Context, i int) (int, error) {
		labels := api.Labels{"env": envs[i%len(envs)], "shard": fmt.Sprint(i % 100)}
		resp, err := client.CreateClusterWithResponse(ctx, api.ClusterCreate{
			Name: fmt.Sprintf("%s-%d", cfg.prefix, i), Labels: &labels,
			Spec: api.ClusterSpec{VersionStream: "stable-4-16"},
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

	live := slices.DeleteFunc(slices.Clone(ids), func(id openapitypes.UUID) bool { return id == openapitypes.UUID{} })
	if len(live) == 0 {
		return fmt.Errorf("no cluster was created")
	}
	pages := max(1, len(live)/100)
	results := []result{
		phase(ctx, cfg, "get", cfg.requests, func(ctx context.Context, _ int) (int, error) {
			resp, err := client.GetClusterWithResponse(ctx, live[rand.IntN(len(live))])
			if err != nil {
				return 0, err
			}
			return resp.StatusCode(), nil
		}, http.StatusOK),
		phase(ctx, cfg, "list", cfg.requests, func(ctx context.Context, _ int) (int, error) {
			resp, err := client.ListClustersWithResponse(ctx, &api.ListClustersParams{Page: ptr(1 + rand.IntN(pages)), Size: ptr(100)})
			if err != nil {
				return 0, err
			}
			return resp.StatusCode(), nil
		}, http.StatusOK),
		phase(ctx, cfg, "search", cfg.requests, func(ctx context.Context, _ int) (int, error) {
			q := fmt.Sprintf("labels.env = '%s' and labels.shard = '%d'", envs[rand.IntN(len(envs))], rand.IntN(100))
			resp, err := client.ListClustersWithResponse(ctx, &api.ListClustersParams{Search: &q, Size: ptr(100)})
			if err != nil {
				return 0, err
			}
			return resp.StatusCode(), nil
		}, http.StatusOK),
	}
	for _, r := range results {
		r.print()
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
