package adapter

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hyperfleet/hyperfleet/internal/command"
)

// Runnable is an adapter built on the runtime: it runs until ctx ends.
type Runnable interface {
	Run(ctx context.Context) error
}

// Program is what an adapter binary names of its own; Command does the rest. O is the adapter's options, A the
// adapter its constructor returns.
type Program[O any, A Runnable] struct {
	// Name is the adapter's name, which its reports carry, and its binary's.
	Name        string
	Short, Long string
	// OpsPort is the port of the ops listener (/healthz, /readyz, /metrics), e.g. "8091".
	OpsPort string
	// Options are the adapter's options with their defaults; Flags binds them to the adapter's own flags.
	Options O
	Flags   func(*O, *pflag.FlagSet)
	// New builds the adapter on the runtime's configuration and the options the flags set.
	New func(rt Config, opts O, log *slog.Logger) (A, error)
}

// Command returns an adapter's command: the runtime's flags and the adapter's, each also read from
// HYPERFLEET_<FLAG>, --log-level, --version, no arguments, JSON logs on the command's stderr; it builds the adapter
// and runs it. Run it with command.Main, which stops it on SIGINT or SIGTERM.
func Command[O any, A Runnable](p Program[O, A]) *cobra.Command {
	rt := Defaults(p.Name, DefaultOpsBindAddress(p.OpsPort))
	opts := p.Options
	return command.Program{
		Name: p.Name, Short: p.Short, Long: p.Long,
		Flags: func(fs *pflag.FlagSet) {
			rt.AddFlags(fs)
			if p.Flags != nil {
				p.Flags(&opts, fs)
			}
		},
		Run: func(ctx context.Context, log *slog.Logger) error {
			a, err := p.New(rt, opts, log)
			if err != nil {
				return err
			}
			return a.Run(ctx)
		},
	}.Command()
}
