// Command cincinnati-sim serves a simulated Cincinnati (OpenShift update service) graph API for development and
// tests: fixture graphs from a directory (<channel>_<arch>.json) over a generated release series, with the admin
// endpoints (/admin/publish, /admin/remove, /admin/fault) for publishing releases and injecting faults. With
// --state-file, releases published or removed through the admin endpoints survive a restart. Logs are JSON on
// stderr.
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

// version and build are set by the linker (-X) in `make build`.
var (
	version = "dev"
	build   = "unknown"
)

type config struct {
	listen    string
	fixtures  string
	stateFile string
	logLevel  string
	series    cincinnatisim.Series
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
	}, logLevel: "info"}
	cmd := &cobra.Command{
		Use:           "cincinnati-sim",
		Short:         "Serve a simulated Cincinnati update graph API for development and tests",
		Version:       version + " (" + build + ")",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			logger := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			return run(cmd.Context(), cfg, logger)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:9400", "address to serve on")
	fs.StringVar(&cfg.stateFile, "state-file", "", "journal of the releases published and removed through /admin, replayed at start (empty: forget them on exit)")
	fs.StringVar(&cfg.logLevel, "log-level", cfg.logLevel, "debug (logs every graph request), info, warn or error")
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
	sim, err := newSimulator(cfg, logger)
	if err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	logger.Info("serving", "addr", ln.Addr().String(), "version", version, "channels", len(sim.Channels()),
		"state_file", cfg.stateFile)
	return serve(ctx, ln, sim.Handler(), logger)
}

// newSimulator creates the simulator with the series, then the fixtures on top, then the journalled releases.
func newSimulator(cfg config, logger *slog.Logger) (*cincinnatisim.Simulator, error) {
	opts := []cincinnatisim.Option{cincinnatisim.WithLogger(logger), cincinnatisim.WithAdmin()}
	var journal *cincinnatisim.Journal
	if cfg.stateFile != "" {
		var err error
		if journal, err = cincinnatisim.OpenJournal(cfg.stateFile); err != nil {
			return nil, fmt.Errorf("--state-file: %w", err)
		}
		opts = append(opts, cincinnatisim.WithJournal(journal))
	}
	sim := cincinnatisim.New(opts...)
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
	if journal != nil {
		if err := journal.Replay(sim); err != nil {
			return nil, fmt.Errorf("--state-file: %w", err)
		}
		if n := len(journal.Entries()); n > 0 {
			logger.Info("replayed journal", "path", cfg.stateFile, "entries", n)
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
