// Command hypershift-sim stands in for the HyperShift operator on a cluster that has the HyperShift CRDs but no
// HyperShift, for development and end-to-end tests: it adds HyperShift's finalizer to HostedClusters, reports
// each release image as a rollout that completes after --delay (Available, version history, API endpoint,
// kubeconfig), and lets deleted HostedClusters go after --deletion-delay. Logs are JSON on stderr. With
// --health-bind-address it serves /healthz (the process runs), /readyz (HostedClusters listed and simulated) and
// /admin/fail, which makes a release's rollouts fail (Degraded or stuck) on all HostedClusters or a share:
//
//	curl -X POST localhost:9600/admin/fail -d '{"version": "4.16.4", "mode": "Degraded", "percent": 30}'
//	curl -X DELETE 'localhost:9600/admin/fail?version=4.16.4'
//
//	hypershift-sim --kubeconfig ~/.kube/config --namespace clusters --delay 5s --health-bind-address 127.0.0.1:9600
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster/hypershiftsim"
	"github.com/hyperfleet/hyperfleet/internal/command"
)

type config struct {
	kubeconfig    string
	namespace     string
	delay         time.Duration
	deletionDelay time.Duration
	version       string
	createSecrets bool
	healthAddr    string
	// kubeQPS and kubeBurst are the client's rate budget (watches aside).
	kubeQPS   float32
	kubeBurst int
}

// defaultKubeQPS and defaultKubeBurst are sized so that the simulator is never what a fleet waits for: it stands
// in for HyperShift's operator, whose own pace is not what HyperFleet measures. Each HostedCluster costs it about
// five writes (the finalizer, two Secrets, two status updates) and one more when it goes; client-go's 5/s default
// made a burst of 200 clusters wait minutes here. 100/s takes 1,000 new clusters in about a minute.
const (
	defaultKubeQPS   = 100
	defaultKubeBurst = 200
)

func main() { command.Main(newCommand(run)) }

// newCommand parses the flags into a config and hands it to runFn.
func newCommand(runFn func(context.Context, config, *slog.Logger) error) *cobra.Command {
	cfg := config{
		delay:         hypershiftsim.DefaultDelay,
		deletionDelay: hypershiftsim.DefaultDeletionDelay,
		version:       hypershiftsim.DefaultVersion,
		createSecrets: true,
		kubeQPS:       defaultKubeQPS,
		kubeBurst:     defaultKubeBurst,
	}
	return command.Program{
		Name: "hypershift-sim", Short: "Simulate the HyperShift operator for HostedClusters on a cluster without HyperShift",
		Flags: cfg.addFlags,
		Run:   func(ctx context.Context, log *slog.Logger) error { return runFn(ctx, cfg, log) },
	}.Command()
}

// addFlags binds the simulator's flags to cfg.
func (cfg *config) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&cfg.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else the in-cluster config, else ~/.kube/config)")
	fs.StringVar(&cfg.namespace, "namespace", "", "namespace of the HostedClusters to simulate (default: all namespaces)")
	fs.DurationVar(&cfg.delay, "delay", cfg.delay, "how long each rollout of a release image takes (0: at once)")
	fs.DurationVar(&cfg.deletionDelay, "deletion-delay", cfg.deletionDelay, "how long after a deletion the finalizer is removed")
	fs.StringVar(&cfg.version, "fallback-version", cfg.version, "OpenShift version reported for release images whose tag names none (e.g. digests) when no hyperfleet.io/release-version annotation does")
	fs.BoolVar(&cfg.createSecrets, "create-secrets", cfg.createSecrets, "create the admin kubeconfig and kubeadmin-password Secrets the status names")
	fs.StringVar(&cfg.healthAddr, "health-bind-address", "", "address of /healthz, /readyz and /admin/fail (empty: none)")
	fs.Float32Var(&cfg.kubeQPS, "kube-api-qps", cfg.kubeQPS, "requests a second of the client (its watch aside)")
	fs.IntVar(&cfg.kubeBurst, "kube-api-burst", cfg.kubeBurst, "requests the client may send at once before --kube-api-qps paces it")
}

// run simulates HyperShift on the cluster cfg points at until ctx is done.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	if cfg.delay < 0 || cfg.deletionDelay < 0 {
		return errors.New("--delay and --deletion-delay must not be negative")
	}
	restCfg, err := clientConfig(cfg)
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	logger.Info("connecting", "server", restCfg.Host, "version", command.Version())
	failures := &hypershiftsim.Failures{}
	sim := hypershiftsim.New(client, hypershiftsim.Options{
		Failures:      failures,
		Namespace:     cfg.namespace,
		Delay:         cfg.delay,
		DeletionDelay: cfg.deletionDelay,
		Version:       cfg.version,
		CreateSecrets: cfg.createSecrets,
		Logger:        logger,
	})
	if cfg.healthAddr == "" {
		return sim.Run(ctx)
	}
	ln, err := command.Listen(ctx, cfg.healthAddr)
	if err != nil {
		return fmt.Errorf("--health-bind-address: %w", err)
	}
	logger.Info("serving health", "addr", ln.Addr().String())
	// The health listener lives as long as the simulator.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return command.Serve(ctx, ln, healthHandler(sim, hypershiftsim.AdminHandler(failures)), logger)
	})
	g.Go(func() error {
		defer stop()
		return sim.Run(ctx)
	})
	return g.Wait()
}

// readiness is what /readyz asks of the simulator.
type readiness interface{ Ready() bool }

// healthHandler answers /healthz while the process serves and /readyz once the simulator works on HostedClusters,
// and hands /admin/ to admin.
func healthHandler(r readiness, admin http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/admin/", admin)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !r.Ready() {
			http.Error(w, "not simulating yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// clientConfig is the client's configuration: the kubeconfig's server and credentials, and the rate budget.
func clientConfig(cfg config) (*rest.Config, error) {
	if cfg.kubeQPS <= 0 || cfg.kubeBurst <= 0 {
		return nil, fmt.Errorf("--kube-api-qps %v and --kube-api-burst %d must be positive", cfg.kubeQPS, cfg.kubeBurst)
	}
	restCfg, err := restConfig(cfg.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	restCfg.QPS, restCfg.Burst = cfg.kubeQPS, cfg.kubeBurst
	return restCfg, nil
}

// restConfig loads the file at path if given; else the file $KUBECONFIG names; else the in-cluster config when
// running in a pod; else ~/.kube/config.
func restConfig(path string) (*rest.Config, error) {
	if path == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		cfg, err := rest.InClusterConfig()
		if err == nil {
			return cfg, nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, err
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}
