// Command hostedcluster-applier is the adapter that turns each Cluster into a HyperShift HostedCluster on a
// management cluster, pins the release image its VersionStream resolves to (rolled only inside the cluster's
// UpgradeSchedule), and reports back what HyperShift says.
//
//	hostedcluster-applier --api-url http://localhost:8000 --kubeconfig ~/.kube/config --pull-secret-file pull-secret.json
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// version and build are set by the linker (-X) in `make build`.
var (
	version = "dev"
	build   = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := command().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostedcluster-applier:", err)
		os.Exit(1)
	}
}

func command() *cobra.Command {
	rt := adapter.Defaults(hostedcluster.Name, adapter.DefaultOpsBindAddress("8092"))
	opts := hostedcluster.DefaultOptions()
	logLevel, kubeconfig := "info", ""
	cmd := &cobra.Command{
		Use:           "hostedcluster-applier",
		Short:         "Apply HyperShift HostedClusters for HyperFleet clusters",
		Version:       version + " (" + build + ")",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			return run(cmd.Context(), rt, opts, kubeconfig, log)
		},
	}
	rt.AddFlags(cmd.Flags())
	opts.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", kubeconfig, "kubeconfig of the management cluster (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account)")
	cmd.Flags().StringVar(&logLevel, "log-level", logLevel, "debug, info, warn or error")
	return cmd
}

func run(ctx context.Context, rt adapter.Config, opts hostedcluster.Options, kubeconfig string, log *slog.Logger) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	kube, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("management cluster: %w", err)
	}
	a, err := hostedcluster.New(rt, opts, kube, log)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
