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
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
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
		fmt.Fprintln(os.Stderr, "version-resolver:", err)
		os.Exit(1)
	}
}

func command() *cobra.Command {
	rt := adapter.Defaults(versionresolver.Name, adapter.DefaultOpsBindAddress("8091"))
	opts := versionresolver.DefaultOptions()
	logLevel := "info"
	cmd := &cobra.Command{
		Use:           "version-resolver",
		Short:         "Resolve VersionStreams to OpenShift release images through Cincinnati",
		Version:       version + " (" + build + ")",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			return run(cmd.Context(), rt, opts, log)
		},
	}
	rt.AddFlags(cmd.Flags())
	opts.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&logLevel, "log-level", logLevel, "debug, info, warn or error")
	return cmd
}

func run(ctx context.Context, rt adapter.Config, opts versionresolver.Options, log *slog.Logger) error {
	a, err := versionresolver.New(rt, opts, log)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
