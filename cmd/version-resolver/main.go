// Command version-resolver is the adapter that resolves each VersionStream to the latest patch release of its
// OpenShift minor, and that release's image, through the Cincinnati update graph.
//
//	version-resolver --api-url http://localhost:8000 --cincinnati-url https://api.openshift.com
//
// It hears of new and changed streams through the API's watch (--source watch, the default), or through the API's
// relay to NATS JetStream (--source nats --nats-url nats://…); a poll every --poll-interval (5 min beside either)
// is the safety net, and --source poll polls alone (every 5 s).
package main

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
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
	opts := versionresolver.DefaultOptions()
	return adapter.Command(adapter.Program{
		Name: versionresolver.Name, Short: "Resolve VersionStreams to OpenShift release images through Cincinnati",
		OpsPort: "8091", Version: version, Build: build, Flags: opts.AddFlags,
		Run: func(ctx context.Context, rt adapter.Config, log *slog.Logger) error {
			a, err := versionresolver.New(rt, opts, log)
			if err != nil {
				return err
			}
			return a.Run(ctx)
		},
	})
}
