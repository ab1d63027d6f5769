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

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// version and build are set by the linker (-X) in `make build`.
var (
	version = "dev"
	build   = "unknown"
)

func main() { command.Main(newCommand()) }

func newCommand() *cobra.Command {
	opts := hostedcluster.DefaultOptions()
	kubeconfig := ""
	return adapter.Command(adapter.Program{
		Name: hostedcluster.Name, Short: "Apply HyperShift HostedClusters for HyperFleet clusters",
		OpsPort: "8092", Version: version, Build: build,
		Flags: func(fs *pflag.FlagSet) {
			opts.AddFlags(fs)
			fs.StringVar(&kubeconfig, "kubeconfig", kubeconfig, "kubeconfig of the management cluster (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account)")
		},
		Run: func(ctx context.Context, rt adapter.Config, log *slog.Logger) error {
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
		},
	})
}
