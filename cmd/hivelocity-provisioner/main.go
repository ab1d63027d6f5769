// Command hivelocity-provisioner is the adapter that turns each NodePool into bare-metal devices at Hivelocity:
// it claims devices an operator tagged for use, reloads them with the pool's OS, hostname, SSH key and user
// data, scales them to the pool's replicas and releases the ones it no longer needs.
//
//	hivelocity-provisioner --api-url http://localhost:8000 --api-key-file /etc/hivelocity/api-key
//	hivelocity-provisioner --hivelocity-url http://127.0.0.1:9500 --api-key-file dev.key   # against hivelocity-sim
package main

import (
	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

func main() { command.Main(newCommand()) }

func newCommand() *cobra.Command {
	return adapter.Command(adapter.Program[hivelocity.Options, *hivelocity.Adapter]{
		Name: hivelocity.Name, OpsPort: "8093", Short: "Provision NodePools as Hivelocity bare-metal devices",
		Options: hivelocity.DefaultOptions(), Flags: (*hivelocity.Options).AddFlags, New: hivelocity.New,
	})
}
