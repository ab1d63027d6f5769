// Command hostedcluster-applier is the adapter that turns each Cluster into a HyperShift HostedCluster on a
// management cluster, pins the release image its VersionStream resolves to (rolled only inside the cluster's
// UpgradeSchedule), and reports back what HyperShift says.
//
//	hostedcluster-applier --api-url http://localhost:8000 --kubeconfig ~/.kube/config --pull-secret-file pull-secret.json
package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

func main() { command.Main(newCommand()) }

// options are the applier's, and the management cluster it applies to.
type options struct {
	hostedcluster.Options
	kubeconfig string
}

func newCommand() *cobra.Command {
	return adapter.Command(adapter.Program[options, *hostedcluster.Adapter]{
		Name: hostedcluster.Name, OpsPort: "8092", Short: "Apply HyperShift HostedClusters for HyperFleet clusters",
		Options: options{Options: hostedcluster.DefaultOptions()},
		Flags: func(o *options, fs *pflag.FlagSet) {
			o.AddFlags(fs)
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the management cluster (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account)")
		},
		New: func(rt adapter.Config, o options, log *slog.Logger) (*hostedcluster.Adapter, error) {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = o.kubeconfig
			kube, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return nil, fmt.Errorf("management cluster: %w", err)
			}
			return hostedcluster.New(rt, o.Options, kube, log)
		},
	})
}
