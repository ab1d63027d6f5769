package adapter

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hyperfleet/hyperfleet/internal/command"
)

// Program is what an adapter binary names of its own; Command does the rest.
type Program struct {
	// Name is the adapter's name, which its reports carry, and its binary's.
	Name        string
	Short, Long string
	// OpsPort is the port of the ops listener (/healthz, /readyz, /metrics), e.g. "8091".
	OpsPort string
	// Version and Build are the linker's (-X main.version, main.build).
	Version, Build string
	// Flags adds the adapter's own flags.
	Flags func(fs *pflag.FlagSet)
	// Run builds the adapter on the runtime's configuration and runs it until ctx ends.
	Run func(ctx context.Context, rt Config, log *slog.Logger) error
}

// Command returns an adapter's command: the runtime's flags and the adapter's, each also read from
// HYPERFLEET_<FLAG>, --log-level, --version, no arguments, JSON logs on the command's stderr. Run it with
// command.Main, which stops it on SIGINT or SIGTERM.
func Command(p Program) *cobra.Command {
	rt := Defaults(p.Name, DefaultOpsBindAddress(p.OpsPort))
	return command.Program{
		Name: p.Name, Short: p.Short, Long: p.Long, Version: p.Version, Build: p.Build,
		Flags: func(fs *pflag.FlagSet) {
			rt.AddFlags(fs)
			if p.Flags != nil {
				p.Flags(fs)
			}
		},
		Run: func(ctx context.Context, log *slog.Logger) error { return p.Run(ctx, rt, log) },
	}.Command()
}
