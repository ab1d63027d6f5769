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
	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

func main() { command.Main(newCommand()) }

func newCommand() *cobra.Command {
	return adapter.Command(adapter.Program[versionresolver.Options, *versionresolver.Adapter]{
		Name: versionresolver.Name, OpsPort: "8091", Short: "Resolve VersionStreams to OpenShift release images through Cincinnati",
		Options: versionresolver.DefaultOptions(), Flags: (*versionresolver.Options).AddFlags, New: versionresolver.New,
	})
}
