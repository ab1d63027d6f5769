// Command cluster-placer is the adapter that places each new Cluster on one of the fleet's ManagementClusters (the
// least used one that is schedulable, reachable, in the cluster's region and matching its selector, with room in
// every budget), reports the placement for the hostedcluster-applier to obey, and frees the slot when the cluster
// is gone (docs/management-clusters.md).
//
//	cluster-placer --api-url http://localhost:8000 --control-plane-vcpu 5 --control-plane-memory-gib 18
//
// It is the one decider of placements: it runs as one replica and refuses --shard-count above 1.
package main

import (
	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/adapters/placement"
	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

func main() { command.Main(newCommand()) }

func newCommand() *cobra.Command {
	return adapter.Command(adapter.Program[placement.Options, *placement.Adapter]{
		Name: placement.Name, OpsPort: "8094", Short: "Place HyperFleet clusters on management clusters",
		Options: placement.DefaultOptions(), Flags: (*placement.Options).AddFlags, New: placement.New,
	})
}
