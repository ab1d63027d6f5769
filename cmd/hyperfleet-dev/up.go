package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/cmd/hyperfleet-dev/internal/supervisor"
)

// upConfig is everything `hyperfleet-dev up` is configured with: every address is a flag, and the components that
// talk to another are given that one's address, so that moving a listener moves its clients.
type upConfig struct {
	devDir    string // tokens, kubeconfig, etcd data, simulator state, logs
	binDir    string // the other binaries
	issuerDir string // the development token issuer's key
	auth      bool
	seed      bool
	color     string
	rawLogs   bool
	allLogs   bool

	dbURL  string // empty: the embedded database
	dbDir  string
	dbPort uint32

	apiAddr, healthAddr, metricsAddr string
	requiredAdapters                 string

	kubeAssets, kubeAssetsBuild string
	// The management clusters' listeners: mc-a's kube-apiserver, etcd and hypershift-sim, and mc-b's.
	kubeAddr, etcdAddr, hypershiftAddr          string
	mcBKubeAddr, mcBEtcdAddr, mcBHypershiftAddr string
	namespace                                   string
	maxHostedClusters                           map[string]int // the seed's capacity per management cluster

	cincinnatiAddr  string
	seriesMinors    []string
	seriesPatches   int
	hivelocityAddr  string
	timeScale       float64
	hypershiftDelay time.Duration

	resolverOps, applierOps, provisionerOps, placerOps string
	pollInterval                                       time.Duration
	placementRetry                                     time.Duration
	streamRecheck                                      time.Duration
	claimSettle                                        time.Duration

	stopTimeout time.Duration
	extraArgs   []string // component=--flag=value
}

func defaultUpConfig() upConfig {
	cache := devCacheDir()
	assets := filepath.Join(cache, "k8s", "1.37.2")
	if v := os.Getenv("KUBEBUILDER_ASSETS"); v != "" {
		assets = v
	}
	binDir := "bin"
	if exe, err := os.Executable(); err == nil {
		binDir = filepath.Dir(exe)
	}
	return upConfig{
		devDir: filepath.Join(cache, "dev"), binDir: binDir, issuerDir: filepath.Join(cache, "dev-issuer"),
		auth: true, seed: true, color: "auto",
		dbPort:  5433,
		apiAddr: "127.0.0.1:8000", healthAddr: "127.0.0.1:8080", metricsAddr: "127.0.0.1:9090",
		// The applier reports on the management clusters too (reachability, capacity), which the placer reads.
		requiredAdapters: "versionstream=" + versionresolver.Name + ";cluster=" + compPlacer + "," + hostedcluster.Name +
			";nodepool=" + hivelocity.Name + ";managementcluster=" + hostedcluster.Name,
		kubeAssets: assets, kubeAddr: "127.0.0.1:6443", etcdAddr: "127.0.0.1:2379", hypershiftAddr: "127.0.0.1:9600",
		mcBKubeAddr: "127.0.0.1:6444", mcBEtcdAddr: "127.0.0.1:2381", mcBHypershiftAddr: "127.0.0.1:9601",
		namespace: "clusters", maxHostedClusters: defaultMaxHostedClusters(),
		cincinnatiAddr: "127.0.0.1:9400", seriesMinors: []string{"4.15", "4.16", "4.17"}, seriesPatches: 3,
		hivelocityAddr: "127.0.0.1:9500", timeScale: 60,
		hypershiftDelay: 5 * time.Second,
		resolverOps:     "127.0.0.1:8091", applierOps: "127.0.0.1:8092", provisionerOps: "127.0.0.1:8093", placerOps: "127.0.0.1:8094",
		pollInterval: 2 * time.Second, placementRetry: 2 * time.Second, streamRecheck: 15 * time.Second, claimSettle: time.Second,
		stopTimeout: 15 * time.Second,
	}
}

func (c *upConfig) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.devDir, "dev-dir", c.devDir, "state kept between runs: tokens, kubeconfig, etcd data, simulator state, logs")
	fs.StringVar(&c.binDir, "bin-dir", c.binDir, "directory of the HyperFleet binaries (make build)")
	fs.StringVar(&c.issuerDir, "issuer-dir", c.issuerDir, "the development token issuer's key and JWKS (as hyperfleet-api token --dir)")
	fs.BoolVar(&c.auth, "auth", c.auth, "JWT authentication and roles, with development tokens (false: every caller is an admin)")
	fs.BoolVar(&c.seed, "seed", c.seed, "create the demo's VersionStream, UpgradeSchedule and ManagementClusters unless they exist")
	fs.StringVar(&c.color, "color", c.color, "colour the logs: auto (on a terminal, unless NO_COLOR is set), always or never")
	fs.BoolVar(&c.rawLogs, "raw-logs", c.rawLogs, "show the components' JSON log lines as they are")
	fs.BoolVar(&c.allLogs, "all-logs", c.allLogs, "also show the API's log lines of the adapters' routine requests (always in its log file)")

	fs.StringVar(&c.dbURL, "db-url", c.dbURL, "PostgreSQL URL to use instead of the embedded database (migrated at start)")
	fs.StringVar(&c.dbDir, "db-dir", c.dbDir, "embedded database's data directory (default: serve --embedded-db's)")
	fs.Uint32Var(&c.dbPort, "db-port", c.dbPort, "embedded database's port on 127.0.0.1")

	fs.StringVar(&c.apiAddr, "api-address", c.apiAddr, "hyperfleet-api's API listener (the adapters and the seed follow it)")
	fs.StringVar(&c.healthAddr, "health-address", c.healthAddr, "hyperfleet-api's health listener")
	fs.StringVar(&c.metricsAddr, "metrics-address", c.metricsAddr, "hyperfleet-api's metrics listener")
	fs.StringVar(&c.requiredAdapters, "required-adapters", c.requiredAdapters, "migrate sets them, serve checks them (--required-adapters)")

	fs.StringVar(&c.kubeAssets, "kube-assets", c.kubeAssets, "directory with etcd and kube-apiserver ($KUBEBUILDER_ASSETS; make k8s-assets)")
	fs.StringVar(&c.kubeAssetsBuild, "kube-assets-build", c.kubeAssetsBuild, "script that builds the kube assets when they are missing, run before kube (make run: cmd/hyperfleet-dev/k8sassets/build.sh)")
	fs.StringVar(&c.kubeAddr, "kube-address", c.kubeAddr, "management cluster mc-a's kube-apiserver HTTPS listener (its kubeconfig follows it)")
	fs.StringVar(&c.etcdAddr, "etcd-address", c.etcdAddr, "mc-a's etcd client listener")
	fs.StringVar(&c.hypershiftAddr, "hypershift-health-address", c.hypershiftAddr, "mc-a's hypershift-sim health listener")
	fs.StringVar(&c.mcBKubeAddr, "mc-b-kube-address", c.mcBKubeAddr, "management cluster mc-b's kube-apiserver HTTPS listener")
	fs.StringVar(&c.mcBEtcdAddr, "mc-b-etcd-address", c.mcBEtcdAddr, "mc-b's etcd client listener")
	fs.StringVar(&c.mcBHypershiftAddr, "mc-b-hypershift-health-address", c.mcBHypershiftAddr, "mc-b's hypershift-sim health listener")
	fs.StringToIntVar(&c.maxHostedClusters, "max-hosted-clusters", c.maxHostedClusters, "capacity.max_hosted_clusters of the seeded ManagementClusters, as mc-a=N,mc-b=M (when the seed creates them)")
	fs.StringVar(&c.namespace, "namespace", c.namespace, "namespace of the HostedClusters on every management cluster")

	fs.StringVar(&c.cincinnatiAddr, "cincinnati-address", c.cincinnatiAddr, "cincinnati-sim's listener (the version resolver follows it)")
	fs.StringSliceVar(&c.seriesMinors, "series-minors", c.seriesMinors, "minors of cincinnati-sim's generated release series")
	fs.IntVar(&c.seriesPatches, "series-patches", c.seriesPatches, "GA patches per minor in cincinnati-sim's series (publish more with hyperfleet-dev publish)")
	fs.StringVar(&c.hivelocityAddr, "hivelocity-address", c.hivelocityAddr, "hivelocity-sim's listener (the provisioner follows it)")
	fs.Float64Var(&c.timeScale, "time-scale", c.timeScale, "hivelocity-sim's time scale: a 10-minute reload takes 10m/scale (and its rate-limit window 1h/scale)")
	fs.DurationVar(&c.hypershiftDelay, "hypershift-delay", c.hypershiftDelay, "how long hypershift-sim takes to roll out a release")

	fs.StringVar(&c.resolverOps, "version-resolver-ops-address", c.resolverOps, "version-resolver's /healthz, /readyz and /metrics")
	fs.StringVar(&c.applierOps, "hostedcluster-applier-ops-address", c.applierOps, "hostedcluster-applier's /healthz, /readyz and /metrics")
	fs.StringVar(&c.provisionerOps, "hivelocity-provisioner-ops-address", c.provisionerOps, "hivelocity-provisioner's /healthz, /readyz and /metrics")
	fs.StringVar(&c.placerOps, "cluster-placer-ops-address", c.placerOps, "cluster-placer's /healthz, /readyz and /metrics")
	fs.DurationVar(&c.placementRetry, "placement-retry", c.placementRetry, "how soon the placer tries again to place a cluster nothing had room for (its --retry-interval)")
	fs.DurationVar(&c.pollInterval, "poll-interval", c.pollInterval, "the adapters' --poll-interval")
	fs.DurationVar(&c.streamRecheck, "stream-recheck", c.streamRecheck, "how soon the version resolver looks for a newer patch (its --recheck-after)")
	fs.DurationVar(&c.claimSettle, "claim-settle", c.claimSettle, "the Hivelocity provisioner's --claim-settle (a deleted pool finalizes after 7 of them)")

	fs.DurationVar(&c.stopTimeout, "stop-timeout", c.stopTimeout, "how long a component may take to stop after SIGTERM before it is killed")
	fs.StringArrayVar(&c.extraArgs, "arg", nil, "an extra argument for one component, as COMPONENT=ARG (repeatable), e.g. version-resolver=--log-level=debug")
}

func upCommand() *cobra.Command {
	cfg := defaultUpConfig()
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the whole system on this machine, supervised, until interrupted",
		Long: `Runs PostgreSQL (embedded, unless --db-url), hyperfleet-api, two management clusters (mc-a and mc-b: a local
kube-apiserver with HyperShift's CRDs and a hypershift-sim each, their kubeconfigs in
<dev-dir>/management-clusters), the Cincinnati and Hivelocity simulators and the four adapters (the cluster placer
among them), each started once what it needs is ready, health-checked, and restarted with backoff when it dies.
Their logs are prefixed with their names (and kept in <dev-dir>/logs); the state of every component is in
<dev-dir>/up.json. Once everything is ready it prints where everything listens, a user token and the CLI's login
line. The demo's VersionStream, UpgradeSchedule and ManagementClusters (mc-a for 2 hosted clusters, mc-b for 1)
are created if missing, cincinnati-sim serves a few patches per minor and hivelocity-sim a dozen spare devices;
all of it, and what you create, survives a restart. Ctrl-C stops everything (SIGTERM, then SIGKILL after
--stop-timeout; a second Ctrl-C kills at once).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUp(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	}
	cfg.addFlags(cmd.Flags())
	return cmd
}

// colorOn decides whether the console gets ANSI colours.
func colorOn(mode string, out any) (bool, error) {
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		f, ok := out.(*os.File)
		return ok && os.Getenv("NO_COLOR") == "" && term.IsTerminal(int(f.Fd())), nil //nolint:gosec // a file descriptor fits an int
	default:
		return false, fmt.Errorf("--color %q: want auto, always or never", mode)
	}
}

// signals returns a context that ends at the first SIGINT or SIGTERM, and a channel closed at the second.
func signals(parent context.Context) (context.Context, <-chan struct{}, func()) {
	ctx, cancel := context.WithCancel(parent)
	kill := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		cancel()
		if _, ok := <-sigs; ok {
			close(kill)
		}
	}()
	return ctx, kill, func() {
		signal.Stop(sigs)
		close(sigs)
		cancel()
	}
}

// splitExtraArgs turns COMPONENT=ARG flags into each component's extra arguments.
func splitExtraArgs(args []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, a := range args {
		name, arg, ok := strings.Cut(a, "=")
		if !ok || name == "" || arg == "" {
			return nil, fmt.Errorf("--arg %q: want COMPONENT=ARG", a)
		}
		out[name] = append(out[name], arg)
	}
	return out, nil
}

var errLocked = errors.New("another hyperfleet-dev up is running on this dev dir")

// lockDevDir takes an exclusive lock on the dev dir for as long as the returned file stays open.
func lockDevDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("dev dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "up.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dev dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil { //nolint:gosec // a file descriptor fits an int
		_ = f.Close()
		return nil, fmt.Errorf("%w (%s): %w", errLocked, dir, err)
	}
	return f, nil
}

// runUp runs the system until ctx ends or a signal comes.
func runUp(parent context.Context, cfg upConfig, out io.Writer) error {
	color, err := colorOn(cfg.color, out)
	if err != nil {
		return err
	}
	lock, err := lockDevDir(cfg.devDir)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Close() }()
	st, err := newStack(cfg)
	if err != nil {
		return err
	}
	if err := st.checkListeners(); err != nil {
		return err
	}
	ctx, kill, stop := signals(parent)
	defer stop()
	if err := st.prepare(); err != nil {
		return err
	}
	specs, err := st.specs()
	if err != nil {
		return err
	}
	sup, err := supervisor.New(supervisor.Config{
		Console: out, Color: color, Raw: cfg.rawLogs,
		LogDir: filepath.Join(cfg.devDir, "logs"), StateFile: filepath.Join(cfg.devDir, "up.json"),
		StopTimeout: cfg.stopTimeout, StartTimeout: 90 * time.Second,
	}, specs)
	if err != nil {
		return err
	}
	if !cfg.auth {
		sup.Warnf("authentication is OFF: every caller of the API is an admin (development only)")
	}
	started := time.Now()
	go st.announce(ctx, sup, started)
	go st.refreshTokens(ctx, sup)
	return sup.Run(ctx, kill)
}
