// Command cincinnati-sim serves a simulated Cincinnati (OpenShift update service) graph API for development and
// tests: fixture graphs from a directory (<channel>_<arch>.json) over a generated release series, with the admin
// endpoints (/admin/publish, /admin/remove, /admin/fault) for publishing releases and injecting faults.
//
//	cincinnati-sim --listen 127.0.0.1:9400 --series-minors 4.15,4.16,4.17 --series-patches 12 --fixtures ./fixtures
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
)

type config struct {
	listen   string
	fixtures string
	series   cincinnatisim.Series
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := command().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cincinnati-sim:", err)
		os.Exit(1)
	}
}

func command() *cobra.Command {
	cfg := config{series: cincinnatisim.Series{
		Minors: []string{"4.15", "4.16", "4.17"}, ChannelGroups: []string{"stable", "fast", "candidate", "eus"},
		Arches: []string{"amd64", "arm64", "multi"}, Patches: 12, Prereleases: true,
	}}
	cmd := &cobra.Command{
		Use:           "cincinnati-sim",
		Short:         "Serve a simulated Cincinnati update graph API for development and tests",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:9400", "address to serve on")
	fs.StringVar(&cfg.fixtures, "fixtures", "", "directory of <channel>_<arch>.json graphs; they replace generated graphs of the same channel and arch")
	fs.StringSliceVar(&cfg.series.Minors, "series-minors", cfg.series.Minors, "minors of the generated series (empty: no series)")
	fs.StringSliceVar(&cfg.series.ChannelGroups, "series-groups", cfg.series.ChannelGroups, "channel groups of the generated series")
	fs.StringSliceVar(&cfg.series.Arches, "series-arches", cfg.series.Arches, "arches of the generated series")
	fs.IntVar(&cfg.series.Patches, "series-patches", cfg.series.Patches, "GA patches per minor in the generated series")
	fs.BoolVar(&cfg.series.Prereleases, "series-prereleases", cfg.series.Prereleases, "add ec and rc releases to candidate channels")
	return cmd
}

// run builds the simulator and serves it on cfg.listen until ctx is done.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	sim, err := build(cfg, logger)
	if err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.listen)
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
