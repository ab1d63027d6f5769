// Command fleet measures what one cluster costs the whole system over its life. It drives a system that
// `hyperfleet-dev up` runs (test/bench/fleet.sh starts one at zero delay): it creates N clusters with a node pool of
// --replicas devices each, all at once, waits until all are Ready, deletes them all and waits until all are gone,
// and reads what each part spent on the way:
//
//   - the API process's CPU time (utime+stime from /proc) and its requests, by caller and route, from its request
//     log (every request is logged with its route template and the caller's identity: an adapter's token names the
//     adapter);
//   - the Hivelocity simulator's request log (/_sim/requests), per device;
//   - each management cluster's apiserver_request_total (its /metrics, read with the kubeconfig the applier uses);
//   - every process's CPU time and peak resident memory (VmHWM), read before they stop.
//
// It prints one markdown table. Its own requests (the creates, deletes and the once-a-second counts it waits
// with) carry request ids of their own (X-Request-Id fleet-bench-…), by which they are listed apart and left out
// of the per-cluster figures; their CPU in the API is not, and is small.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// config is what a run is given.
type config struct {
	devDir        string // hyperfleet-dev up's --dev-dir: up.json, logs/, management-clusters/, user.token
	url           string // the API
	hivelocityURL string // hivelocity-sim, for /_sim/requests
	clusters      int
	concurrency   int
	replicas      int
	prefix        string
	stream        string
	schedule      string
	deviceType    string
	region        string
	sshKey        string
	poll          time.Duration
	timeout       time.Duration
	out           io.Writer
	errs          io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := command().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func command() *cobra.Command {
	cfg := config{url: "http://127.0.0.1:8000", hivelocityURL: "http://127.0.0.1:9500", clusters: 200, concurrency: 32,
		replicas: 3, prefix: "fleet", stream: "stable-4-16", schedule: "anytime", deviceType: "hvWorker", region: "LAX2",
		sshKey: "hyperfleet-dev", poll: time.Second, timeout: 30 * time.Minute}
	cmd := &cobra.Command{
		Use:   "fleet --dev-dir DIR",
		Short: "Measure the whole loop's cost per cluster: N clusters with node pools created, Ready, deleted, gone",
		Long: `Drives a system run by hyperfleet-dev up (test/bench/fleet.sh, make bench-fleet): N clusters, each with a
node pool, created at once; all Ready; all deleted; all gone. Prints one markdown table: the times, the API's CPU and
requests per cluster lifecycle by caller and route, Hivelocity calls per device, management-cluster requests per
cluster, and every process's CPU and peak memory.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.devDir == "" {
				return errors.New("--dev-dir is required (hyperfleet-dev up's)")
			}
			if cfg.clusters < 1 || cfg.concurrency < 1 || cfg.replicas < 1 || cfg.poll <= 0 || cfg.timeout <= 0 {
				return errors.New("--clusters, --concurrency, --replicas, --poll and --timeout must be positive")
			}
			cfg.out, cfg.errs = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return run(cmd.Context(), cfg)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.devDir, "dev-dir", cfg.devDir, "hyperfleet-dev up's --dev-dir (its state file, logs, kubeconfigs and user token)")
	fs.StringVar(&cfg.url, "url", cfg.url, "the API")
	fs.StringVar(&cfg.hivelocityURL, "hivelocity-url", cfg.hivelocityURL, "hivelocity-sim (its /_sim/requests)")
	fs.IntVar(&cfg.clusters, "clusters", cfg.clusters, "clusters to create, each with one node pool")
	fs.IntVar(&cfg.concurrency, "concurrency", cfg.concurrency, "creates (and deletes) in flight at once")
	fs.IntVar(&cfg.replicas, "replicas", cfg.replicas, "devices of each node pool")
	fs.StringVar(&cfg.prefix, "prefix", cfg.prefix, "cluster name prefix")
	fs.StringVar(&cfg.stream, "version-stream", cfg.stream, "the clusters' VersionStream (hyperfleet-dev's seed)")
	fs.StringVar(&cfg.schedule, "upgrade-schedule", cfg.schedule, "the clusters' UpgradeSchedule (hyperfleet-dev's seed)")
	fs.StringVar(&cfg.deviceType, "device-type", cfg.deviceType, "the node pools' Hivelocity device type")
	fs.StringVar(&cfg.region, "region", cfg.region, "the node pools' Hivelocity region")
	fs.StringVar(&cfg.sshKey, "ssh-key", cfg.sshKey, "the node pools' SSH key name")
	fs.DurationVar(&cfg.poll, "poll", cfg.poll, "how often it counts the Ready (and remaining) clusters and node pools")
	fs.DurationVar(&cfg.timeout, "timeout", cfg.timeout, "longest the whole run may take")
	return cmd
}

func run(ctx context.Context, cfg config) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	token, err := os.ReadFile(filepath.Join(cfg.devDir, "user.token"))
	if err != nil {
		return fmt.Errorf("the user token of hyperfleet-dev up: %w", err)
	}
	client, err := newFleetClient(cfg, strings.TrimSpace(string(token)))
	if err != nil {
		return err
	}
	procs, err := findProcesses(filepath.Join(cfg.devDir, "up.json"))
	if err != nil {
		return err
	}
	mcs, err := newManagementClusters(filepath.Join(cfg.devDir, "management-clusters"))
	if err != nil {
		return err
	}
	hv := &hivelocityLog{url: cfg.hivelocityURL, client: &http.Client{Timeout: time.Minute}}
	apiLog := filepath.Join(cfg.devDir, "logs", "hyperfleet-api.log")

	before, err := takeSnapshot(ctx, procs, mcs, apiLog)
	if err != nil {
		return err
	}
	if err := hv.reset(ctx); err != nil {
		return err
	}
	fmt.Fprintf(cfg.errs, "fleet: %d clusters with %d-device node pools, %d creates at once\n", cfg.clusters, cfg.replicas, cfg.concurrency)
	times, err := lifecycle(ctx, cfg, client)
	if err != nil {
		return err
	}
	// The last requests of the loop (an adapter's final report, the count that saw the end) reach the API's log a
	// moment after they are answered.
	time.Sleep(time.Second)
	after, err := takeSnapshot(ctx, procs, mcs, apiLog)
	if err != nil {
		return err
	}
	calls, err := hv.read(ctx)
	if err != nil {
		return err
	}
	requests, err := readRequests(apiLog, before.apiLogOffset, after.apiLogOffset)
	if err != nil {
		return err
	}
	return report{cfg: cfg, times: times, procs: procs, before: before, after: after, requests: requests, hivelocity: calls}.print(cfg.out)
}
