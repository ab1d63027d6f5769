// Command hostedcluster-applier is the adapter that turns each Cluster into a HyperShift HostedCluster on a
// management cluster, pins the release image its VersionStream resolves to (rolled only inside the cluster's
// UpgradeSchedule), and reports back what HyperShift says.
//
//	hostedcluster-applier --api-url http://localhost:8000 --kubeconfig ~/.kube/config --pull-secret-file pull-secret.json
//
// With --management-cluster-credentials DIR instead of --kubeconfig it serves every ManagementCluster, each through
// the kubeconfig in DIR that the ManagementCluster names, and applies each cluster on the one the cluster-placer
// chose (docs/management-clusters.md).
package main

import (
	"errors"
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
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the one management cluster (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account); excludes --management-cluster-credentials")
		},
		New: func(rt adapter.Config, o options, log *slog.Logger) (*hostedcluster.Adapter, error) {
			// Zero would mean the default to the adapter's Options; on the command line it is a mistake.
			if o.KubeQPS <= 0 || o.KubeBurst <= 0 {
				return nil, fmt.Errorf("--kube-api-qps %v and --kube-api-burst %d must be positive", o.KubeQPS, o.KubeBurst)
			}
			if o.CredentialsDir != "" {
				if o.kubeconfig != "" {
					return nil, errors.New("--kubeconfig and --management-cluster-credentials exclude each other: " +
						"give --kubeconfig for one management cluster, or the directory for every ManagementCluster")
				}
				return hostedcluster.NewFleet(rt, o.Options, log)
			}
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
