// Command hivelocity-sim serves a simulated Hivelocity API (the subset the Hivelocity provisioner uses, see package
// hivelocitysim) for development and tests, with its admin endpoints under /_sim/ for seeding devices, reading the
// request log and injecting faults. With --state-file, its devices (tags, reloads in flight), catalogue and SSH keys
// survive a restart; seeding happens only when the file does not exist yet.
//
//	hivelocity-sim --listen 127.0.0.1:9500 --seed-demo --time-scale 100
//	curl -H 'X-API-KEY: dev' http://127.0.0.1:9500/bare-metal-devices/
//
// Point the official client at it with cfg.BasePath = "http://127.0.0.1:9500" (or ".../api/v2").
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/internal/command"
)

// defaultAPIKey is the key accepted when no --api-key-file is given.
const defaultAPIKey = "dev"

type config struct {
	listen         string
	apiKeyFile     string
	apiKeyInterval time.Duration
	timeScale      float64
	durations      hivelocitysim.Durations
	rateLimit      hivelocitysim.RateLimit
	rateLimitReset string
	seedFile       string
	stateFile      string
	seedDemo       bool
	clock          clock.WithTicker
}

func main() { command.Main(newCommand()) }

func newCommand() *cobra.Command {
	cfg := config{
		durations: hivelocitysim.DefaultDurations(),
		rateLimit: hivelocitysim.DocumentedRateLimit(),
		clock:     clock.RealClock{},
	}
	return command.Program{
		Name: "hivelocity-sim", Short: "Serve a simulated Hivelocity API for development and tests",
		Flags: cfg.addFlags,
		Run:   func(ctx context.Context, log *slog.Logger) error { return run(ctx, cfg, log) },
	}.Command()
}

// addFlags binds the simulator's flags to cfg.
func (cfg *config) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:9500", "address to serve on")
	fs.StringVar(&cfg.apiKeyFile, "api-key-file", "", "file of valid API keys, one per line, re-read when it changes (default: accept the key \"dev\")")
	fs.DurationVar(&cfg.apiKeyInterval, "api-key-reload-interval", 2*time.Second, "how often --api-key-file is checked for changes")
	fs.Float64Var(&cfg.timeScale, "time-scale", 1, "divides every device duration: 100 makes a 10-minute reload take 6 seconds")
	fs.DurationVar(&cfg.durations.ReloadPoweredOff, "reload-powered-off", cfg.durations.ReloadPoweredOff, "unscaled time a reload keeps the device off before the installer boots")
	fs.DurationVar(&cfg.durations.ReloadPoweredOn, "reload-powered-on", cfg.durations.ReloadPoweredOn, "unscaled time the installer runs, powered on, until the reload is done")
	fs.DurationVar(&cfg.durations.Shutdown, "shutdown-duration", cfg.durations.Shutdown, "unscaled time of a shutdown")
	fs.DurationVar(&cfg.durations.Boot, "boot-duration", cfg.durations.Boot, "unscaled time of a boot")
	fs.IntVar(&cfg.rateLimit.Limit, "rate-limit", cfg.rateLimit.Limit, "requests per window per API key (0: no rate limit)")
	fs.IntVar(&cfg.rateLimit.AnonymousLimit, "rate-limit-anonymous", cfg.rateLimit.AnonymousLimit, "requests per window without a valid API key (0: --rate-limit)")
	fs.DurationVar(&cfg.rateLimit.Window, "rate-limit-window", cfg.rateLimit.Window, "length of a rate-limit window")
	fs.StringVar(&cfg.rateLimitReset, "rate-limit-reset", "seconds", "X-RateLimit-Reset as documented, seconds until the window ends (\"seconds\"), or its Unix time (\"unix\")")
	fs.StringVar(&cfg.seedFile, "seed-file", "", "JSON list of devices to seed")
	fs.StringVar(&cfg.stateFile, "state-file", "", "file the simulator's devices, catalogue and SSH keys are saved in after every change and restored from at start, instead of seeding (empty: nothing is kept)")
	fs.BoolVar(&cfg.seedDemo, "seed-demo", false, "seed a dozen spare devices in LAX2 and NYC1 (types hvControlPlane and hvWorker) and the SSH key hyperfleet-dev")
}

// run builds the simulator and serves it on cfg.listen until ctx is done, re-reading the API key file meanwhile.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	sim, keyFile, err := newSimulator(cfg, logger)
	if err != nil {
		return err
	}
	handler := sim.Handler()
	if cfg.stateFile != "" {
		file := hivelocitysim.NewStateFile(cfg.stateFile, sim)
		if err := file.Save(); err != nil {
			return fmt.Errorf("--state-file: %w", err)
		}
		handler = file.Handler(handler)
	}
	ln, err := command.Listen(ctx, cfg.listen)
	if err != nil {
		return err
	}
	logger.Info("serving", "addr", ln.Addr().String(), "version", command.Version(), "devices", len(sim.Devices()),
		"time_scale", cfg.timeScale)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if cfg.apiKeyFile != "" {
		wg.Go(func() { watchKeys(ctx, cfg.clock, cfg.apiKeyFile, cfg.apiKeyInterval, keyFile, sim, logger) })
	}
	err = command.Serve(ctx, ln, handler, logger)
	cancel()
	wg.Wait()
	return err
}

// newSimulator checks cfg and creates the simulator with its keys, and with the state of --state-file if there is
// one, else with its seed devices. It returns the key file's content as read, so that the watcher notices only
// later changes.
func newSimulator(cfg config, logger *slog.Logger) (*hivelocitysim.Simulator, []byte, error) {
	if cfg.timeScale <= 0 {
		return nil, nil, fmt.Errorf("--time-scale %v: must be positive", cfg.timeScale)
	}
	rate := cfg.rateLimit
	switch cfg.rateLimitReset {
	case "seconds":
	case "unix":
		rate.ResetUnix = true
	default:
		return nil, nil, fmt.Errorf("--rate-limit-reset %q: want seconds or unix", cfg.rateLimitReset)
	}
	if rate.Limit < 0 || rate.AnonymousLimit < 0 || rate.Window <= 0 {
		return nil, nil, fmt.Errorf("--rate-limit, --rate-limit-anonymous and --rate-limit-window must not be negative, and the window not zero")
	}
	keys, keyFile := []string{defaultAPIKey}, []byte(nil)
	if cfg.apiKeyFile != "" {
		var err error
		if keyFile, err = os.ReadFile(cfg.apiKeyFile); err != nil {
			return nil, nil, fmt.Errorf("--api-key-file: %w", err)
		}
		if keys = hivelocitysim.ParseAPIKeys(keyFile); len(keys) == 0 {
			return nil, nil, fmt.Errorf("--api-key-file %s: no keys", cfg.apiKeyFile)
		}
	}
	sim := hivelocitysim.New(hivelocitysim.Options{
		Clock:     cfg.clock,
		TimeScale: cfg.timeScale,
		Durations: cfg.durations,
		APIKeys:   keys,
		RateLimit: rate,
		Logger:    logger,
	})
	if cfg.stateFile != "" {
		st, err := hivelocitysim.LoadState(cfg.stateFile)
		switch {
		case err == nil:
			if err := sim.Restore(st); err != nil {
				return nil, nil, fmt.Errorf("--state-file %s: %w", cfg.stateFile, err)
			}
			logger.Info("state restored; seeding skipped", "path", cfg.stateFile, "devices", len(st.Devices))
			return sim, keyFile, nil
		case !errors.Is(err, os.ErrNotExist):
			return nil, nil, fmt.Errorf("--state-file: %w", err)
		}
	}
	if cfg.seedDemo {
		if err := sim.Seed(hivelocitysim.DemoDevices()...); err != nil {
			return nil, nil, err
		}
		if err := sim.SetSSHKeys(hivelocitysim.DemoSSHKeys()...); err != nil {
			return nil, nil, err
		}
	}
	if cfg.seedFile != "" {
		data, err := os.ReadFile(cfg.seedFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--seed-file: %w", err)
		}
		devices, err := hivelocitysim.ParseDevices(data)
		if err != nil {
			return nil, nil, fmt.Errorf("--seed-file %s: %w", cfg.seedFile, err)
		}
		if err := sim.Seed(devices...); err != nil {
			return nil, nil, fmt.Errorf("--seed-file %s: %w", cfg.seedFile, err)
		}
	}
	return sim, keyFile, nil
}

// watchKeys re-reads the key file on every tick until ctx is done and installs its keys when its content changed.
// A file that cannot be read or holds no key leaves the keys as they are.
func watchKeys(ctx context.Context, clk clock.WithTicker, path string, every time.Duration, last []byte, sim *hivelocitysim.Simulator, logger *slog.Logger) {
	t := clk.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		data, err := os.ReadFile(path)
		if err != nil {
			logger.Warn("api key file unreadable; keeping the keys", "path", path, "error", err)
			continue
		}
		if bytes.Equal(data, last) {
			continue
		}
		keys := hivelocitysim.ParseAPIKeys(data)
		if len(keys) == 0 {
			logger.Warn("api key file holds no key; keeping the keys", "path", path)
			continue
		}
		sim.SetAPIKeys(keys...)
		last = data
		logger.Info("api keys reloaded", "path", path, "count", len(keys))
	}
}
