// Command cincinnati-sim serves a simulated Cincinnati (OpenShift update service) graph API for development and
// tests: fixture graphs from a directory (<channel>_<arch>.json) over a generated release series, with the admin
// endpoints (/admin/publish, /admin/remove, /admin/conditional-edge, /admin/remove-edge, /admin/fault) for
// publishing and pulling releases, gating or removing update edges and injecting faults. With --state-file, the
// changes made through the admin endpoints (all but faults) survive a restart. Logs are JSON on stderr. Each flag is
// also read from HYPERFLEET_<FLAG>.
//
//	cincinnati-sim --listen 127.0.0.1:9400 --series-minors 4.15,4.16,4.17 --series-patches 12 --fixtures ./fixtures
package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/internal/command"
)

type config struct {
	listen    string
	fixtures  string
	stateFile string
	series    cincinnatisim.Series
}

func main() { command.Main(newCommand()) }

func newCommand() *cobra.Command {
	cfg := config{series: cincinnatisim.Series{
		Minors: []string{"4.15", "4.16", "4.17"}, ChannelGroups: []string{"stable", "fast", "candidate", "eus"},
		Arches: []string{"amd64", "arm64", "multi"}, Patches: 12, Prereleases: true,
	}}
	return command.Program{
		Name: "cincinnati-sim", Short: "Serve a simulated Cincinnati update graph API for development and tests",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&cfg.listen, "listen", "127.0.0.1:9400", "address to serve on")
			fs.StringVar(&cfg.stateFile, "state-file", "", "journal of the releases published and removed through /admin, replayed at start (empty: forget them on exit)")
			fs.StringVar(&cfg.fixtures, "fixtures", "", "directory of <channel>_<arch>.json graphs; they replace generated graphs of the same channel and arch")
			fs.StringSliceVar(&cfg.series.Minors, "series-minors", cfg.series.Minors, "minors of the generated series (empty: no series)")
			fs.StringSliceVar(&cfg.series.ChannelGroups, "series-groups", cfg.series.ChannelGroups, "channel groups of the generated series")
			fs.StringSliceVar(&cfg.series.Arches, "series-arches", cfg.series.Arches, "arches of the generated series")
			fs.IntVar(&cfg.series.Patches, "series-patches", cfg.series.Patches, "GA patches per minor in the generated series")
			fs.BoolVar(&cfg.series.Prereleases, "series-prereleases", cfg.series.Prereleases, "add ec and rc releases to candidate channels")
		},
		Run: func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) },
	}.Command()
}

// run builds the simulator and serves it on cfg.listen until ctx is done.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	sim, err := newSimulator(cfg, logger)
	if err != nil {
		return err
	}
	ln, err := command.Listen(ctx, cfg.listen)
	if err != nil {
		return err
	}
	logger.Info("serving", "addr", ln.Addr().String(), "version", command.Version(), "channels", len(sim.Channels()),
		"state_file", cfg.stateFile)
	return command.Serve(ctx, ln, sim.Handler(), logger)
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
