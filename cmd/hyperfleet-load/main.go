// Command hyperfleet-load measures a running hyperfleet-api: create, get, list (size 100) and label-search
// throughput with p50/p99 latency, from a fixed number of concurrent clients. Every phase is bounded by a request
// count and a time limit, so a run always ends.
//
//	hyperfleet-load --url http://127.0.0.1:8000 --token-file admin.token --clusters 10000 --concurrency 8
//
// The status, settle, unchanged and poll phases act as adapters: status posts reports from --adapters at random
// over the created clusters, each saying something new (start the API with those as required adapters to measure
// aggregation too); settle posts one report per cluster from the first adapter; unchanged repeats settle's reports
// at random, which the API answers without writing (serve --status-heartbeat); poll measures that adapter's idle
// `pending_for` query. They need a token that may report as those adapters (an admin's).
//
// With --db-url (PostgreSQL on this machine) each phase also says the database's CPU time per request: the CPU
// of the client backends serving that database, read from /proc.
//
// The streams phase creates --streams VersionStreams; resolved then waits until a running version-resolver has
// made every one of them Ready and prints how many it resolved per second (start the resolver after streams).
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	cmdmain "github.com/hyperfleet/hyperfleet/internal/command"
)

// envToken names the variable holding the bearer token when neither --token nor --token-file is given.
const envToken = "HYPERFLEET_TOKEN"

// phaseOrder lists the phases in the order they run.
const phaseOrder = "streams,resolved,create,get,list,walk,search,status,settle,unchanged,poll"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := command().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hyperfleet-load:", err)
		os.Exit(1)
	}
}

func command() *cobra.Command {
	var (
		cfg              config
		phases           []string
		token, tokenFile string
		metricsURL       string
		dbURL            string
	)
	cmd := &cobra.Command{
		Use:   "hyperfleet-load",
		Short: "Measure a running hyperfleet-api: throughput and p50/p99 latency per phase",
		Long: `Drives a running hyperfleet-api with --concurrency clients through the --phases, each bounded by a request
count and --phase-limit, and prints per phase the requests answered as expected (ok; for status reports also
stale: 409 HYPERFLEET-STS-001, a report older than the one the API holds, which concurrent reports for one
resource and adapter are meant to get), the failures, and req/s, p50 and p99 over every expected answer.
It exits 1 if any request failed.

An API with authentication (make run) needs a bearer token: --token-file, $` + envToken + ` or --token; make bench
mints one.`,
		Version:       cmdmain.Version() + " (" + cmdmain.Build() + ")",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.concurrency < 1 || cfg.clusters < 1 || cfg.requests < 1 || cfg.streams < 1 {
				return errors.New("--concurrency, --clusters, --streams and --requests must be positive")
			}
			cfg.phases = map[string]bool{}
			for _, p := range phases {
				if p = strings.TrimSpace(p); !slices.Contains(strings.Split(phaseOrder, ","), p) {
					return fmt.Errorf("--phases: unknown phase %q (known: %s)", p, phaseOrder)
				}
				cfg.phases[p] = true
			}
			if len(cfg.adapters) == 0 {
				return errors.New("--adapters must name at least one adapter")
			}
			var err error
			if cfg.token, err = bearerToken(token, tokenFile); err != nil {
				return err
			}
			cfg.out, cfg.errs = cmd.OutOrStdout(), cmd.ErrOrStderr()
			cfg.metrics = &apiProcess{url: metricsURL, client: &http.Client{Timeout: 5 * time.Second}}
			if cfg.db, err = openDBBackends(cmd.Context(), dbURL); err != nil {
				return err
			}
			defer cfg.db.close(context.WithoutCancel(cmd.Context()))
			return run(cmd.Context(), cfg)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.url, "url", "http://127.0.0.1:8000", "API base URL")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the bearer token; without it and --token, $"+envToken+" is sent if set")
	fs.StringVar(&token, "token", "", "bearer token (other users of the machine can see it: prefer --token-file or $"+envToken+")")
	fs.IntVar(&cfg.clusters, "clusters", 10000, "clusters to create (the create phase; the data set of the others)")
	fs.IntVar(&cfg.streams, "streams", 10000, "version streams the streams phase creates")
	fs.IntVar(&cfg.requests, "requests", 5000, "requests in each of the get, list, search, status and poll phases")
	fs.IntVar(&cfg.concurrency, "concurrency", 8, "concurrent clients")
	fs.DurationVar(&cfg.phaseLimit, "phase-limit", 2*time.Minute, "longest a phase may run")
	fs.StringVar(&cfg.prefix, "prefix", fmt.Sprintf("load-%d", time.Now().Unix()%100000), "cluster and stream name prefix (names must be new)")
	fs.StringSliceVar(&phases, "phases", []string{"create", "get", "list", "search"}, "phases to run, in this order: "+phaseOrder)
	fs.StringVar(&metricsURL, "metrics-url", "http://127.0.0.1:9090/metrics", "the API's Prometheus endpoint, for its CPU time per request and memory (\"\" to skip)")
	fs.StringVar(&dbURL, "db-url", "", "the API's database, for PostgreSQL's CPU time per request: its client backends' CPU from /proc (PostgreSQL on this machine only; \"\" to skip)")
	fs.StringSliceVar(&cfg.adapters, "adapters", []string{"load-a", "load-b", "load-c"}, "adapter names the status phases report as")
	return cmd
}

// bearerToken returns the token to send: --token, the content of --token-file, or $HYPERFLEET_TOKEN; empty for
// an API without authentication.
func bearerToken(token, file string) (string, error) {
	if token != "" && file != "" {
		return "", errors.New("give --token or --token-file, not both")
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return "", fmt.Errorf("--token-file %s is empty", file)
		}
		return token, nil
	}
	if token != "" {
		return token, nil
	}
	return strings.TrimSpace(os.Getenv(envToken)), nil
}
