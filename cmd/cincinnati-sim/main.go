// Command cincinnati-sim serves a simulated Cincinnati (OpenShift update service) graph API for development and
// tests: fixture graphs from a directory (<channel>_<arch>.json) over a generated release series, with the admin
// endpoints (/admin/publish, /admin/remove, /admin/fault) for publishing releases and injecting faults.
//
//	cincinnati-sim --listen 127.0.0.1:9400 --series-minors 4.15,4.16,4.17 --series-patches 12 --fixtures ./fixtures
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
)

type config struct {
	listen   string
	fixtures string
	series   cincinnatisim.Series
}

func main() {
	var cfg config
	flag.StringVar(&cfg.listen, "listen", "127.0.0.1:9400", "address to serve on")
	flag.StringVar(&cfg.fixtures, "fixtures", "", "directory of <channel>_<arch>.json graphs; they replace generated graphs of the same channel and arch")
	minors := flag.String("series-minors", "4.15,4.16,4.17", "minors of the generated series, comma-separated (empty: no series)")
	groups := flag.String("series-groups", "stable,fast,candidate,eus", "channel groups of the generated series")
	arches := flag.String("series-arches", "amd64,arm64,multi", "arches of the generated series")
	flag.IntVar(&cfg.series.Patches, "series-patches", 12, "GA patches per minor in the generated series")
	flag.BoolVar(&cfg.series.Prereleases, "series-prereleases", true, "add ec and rc releases to candidate channels")
	flag.Parse()
	cfg.series.Minors = splitList(*minors)
	cfg.series.ChannelGroups = splitList(*groups)
	cfg.series.Arches = splitList(*arches)

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("cincinnati-sim failed", "err", err)
		os.Exit(1)
	}
}

// run builds the simulator and serves it on cfg.listen until ctx is done.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	sim, err := build(cfg, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	logger.Info("serving", "addr", ln.Addr().String(), "channels", len(sim.Channels()))
	return serve(ctx, ln, sim.Handler(), logger)
}

// build creates the simulator with the series, then the fixtures on top.
func build(cfg config, logger *slog.Logger) (*cincinnatisim.Simulator, error) {
	sim := cincinnatisim.New(cincinnatisim.WithLogger(logger), cincinnatisim.WithAdmin())
	if len(cfg.series.Minors) > 0 {
		if err := sim.AddSeries(cfg.series); err != nil {
			return nil, err
		}
	}
	if cfg.fixtures != "" {
		if err := sim.LoadFixtures(cfg.fixtures); err != nil {
			return nil, err
		}
	}
	return sim, nil
}

// serve serves h on ln until ctx is done, then shuts down, giving in-flight requests 10 seconds.
func serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
