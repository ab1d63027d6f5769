// Command hivelocity-provisioner is the adapter that turns each NodePool into bare-metal devices at Hivelocity:
// it claims devices an operator tagged for use, reloads them with the pool's OS, hostname, SSH key and user
// data, scales them to the pool's replicas and releases the ones it no longer needs.
//
//	hivelocity-provisioner --api-url http://localhost:8000 --api-key-file /etc/hivelocity/api-key
//	hivelocity-provisioner --hivelocity-url http://127.0.0.1:9500 --api-key-file dev.key   # against hivelocity-sim
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
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
		fmt.Fprintln(os.Stderr, "hivelocity-provisioner:", err)
		os.Exit(1)
	}
}

func command() *cobra.Command {
	rt := adapter.Defaults(hivelocity.Name, adapter.DefaultOpsBindAddress("8093"))
	opts := hivelocity.DefaultOptions()
	logLevel := "info"
	cmd := &cobra.Command{
		Use:           "hivelocity-provisioner",
		Short:         "Provision NodePools as Hivelocity bare-metal devices",
		Version:       version + " (" + build + ")",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			return run(cmd.Context(), rt, opts, log)
		},
	}
	rt.AddFlags(cmd.Flags())
	opts.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&logLevel, "log-level", logLevel, "debug, info, warn or error")
	return cmd
}

func run(ctx context.Context, rt adapter.Config, opts hivelocity.Options, log *slog.Logger) error {
	a, err := hivelocity.New(rt, opts, log)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
