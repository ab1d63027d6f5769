// Command hivelocity-provisioner is the adapter that turns each NodePool into bare-metal devices at Hivelocity:
// it claims devices an operator tagged for use, reloads them with the pool's OS, hostname, SSH key and user
// data, scales them to the pool's replicas and releases the ones it no longer needs.
//
//	hivelocity-provisioner --api-url http://localhost:8000 --api-key-file /etc/hivelocity/api-key
//	hivelocity-provisioner --hivelocity-url http://127.0.0.1:9500 --api-key-file dev.key   # against hivelocity-sim
package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
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
	opts := hivelocity.DefaultOptions()
	return adapter.Command(adapter.Program{
		Name: hivelocity.Name, Short: "Provision NodePools as Hivelocity bare-metal devices",
		OpsPort: "8093", Version: version, Build: build, Flags: opts.AddFlags,
		Run: func(ctx context.Context, rt adapter.Config, log *slog.Logger) error {
			a, err := hivelocity.New(rt, opts, log)
			if err != nil {
				return err
			}
			return a.Run(ctx)
		},
	})
}
