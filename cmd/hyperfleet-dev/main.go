// Command hyperfleet-dev runs HyperFleet, and the infrastructure it needs, on one machine for development.
//
//	hyperfleet-dev up        the whole system, supervised: database, API, two management clusters, simulators, adapters
//	hyperfleet-dev publish   a new OpenShift release in the Cincinnati simulator
//	hyperfleet-dev kube      a local kube-apiserver with HyperShift's CRDs, for hostedcluster-applier and hypershift-sim
//	hyperfleet-dev db        the private development PostgreSQL
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/internal/command"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := rootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hyperfleet-dev:", err)
		os.Exit(1)
	}
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "hyperfleet-dev",
		Short:         "Development infrastructure for HyperFleet on one machine",
		Version:       command.Version() + " (" + command.Build() + ")",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(upCommand(), publishCommand(), kubeCommand(), dbCommand())
	return root
}
