// Package command is what every long-running HyperFleet binary's main shares: a cobra command that takes no
// arguments, prints --version, reads each flag not given on the command line from HYPERFLEET_<FLAG>, logs JSON to
// the command's stderr at --log-level, and runs until SIGINT or SIGTERM; and the HTTP serving a simulator does.
// The adapters (pkg/adapter.Command), the simulators and hyperfleet-api build on it, so that their mains name only
// what is their own.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version, build and buildTime are set by the linker for every binary of the project (make build, the
// Dockerfile): -X github.com/hyperfleet/hyperfleet/internal/command.version=…, ….build=… and ….buildTime=…. They
// are the only package variables of the project's code, and nothing assigns them.
var (
	version   = "dev"
	build     = "unknown"
	buildTime = ""
)

// Version is the version the binary was built as ("dev" unless the build stamped one).
func Version() string { return version }

// Build is the commit the binary was built from ("unknown" unless the build stamped one).
func Build() string { return build }

// BuildTime is when the binary was built, RFC 3339 in UTC, or "" when the build did not stamp it (go build and
// go test do not).
func BuildTime() string { return buildTime }

// EnvPrefix starts the name of the environment variable of every flag: --db-url is HYPERFLEET_DB_URL.
const EnvPrefix = "HYPERFLEET_"

// Program is one binary: its name, what it does, its own flags and what it runs.
type Program struct {
	Name, Short, Long string
	// Flags adds the program's own flags (--log-level is added for it).
	Flags func(fs *pflag.FlagSet)
	// Check, when set, validates the flags before the logger is made; its error is the command's.
	Check func() error
	// Run runs until ctx ends; log writes JSON to the command's stderr.
	Run func(ctx context.Context, log *slog.Logger) error
	// Getenv reads the environment (nil: os.LookupEnv), for tests.
	Getenv func(string) (string, bool)
}

// Command returns the program's command.
func (p Program) Command() *cobra.Command {
	logLevel := "info"
	cmd := &cobra.Command{
		Use:           p.Name,
		Short:         p.Short,
		Long:          p.Long,
		Version:       version + " (" + build + ")",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lookup := p.Getenv
			if lookup == nil {
				lookup = os.LookupEnv
			}
			if err := BindEnv(cmd.Flags(), lookup); err != nil {
				return err
			}
			log, err := Logger(cmd.ErrOrStderr(), logLevel)
			if err != nil {
				return err
			}
			if p.Check != nil {
				if err := p.Check(); err != nil {
					return err
				}
			}
			return p.Run(cmd.Context(), log)
		},
	}
	if p.Flags != nil {
		p.Flags(cmd.Flags())
	}
	cmd.Flags().StringVar(&logLevel, "log-level", logLevel, "debug, info, warn or error")
	return cmd
}

// BindEnv sets each flag not given on the command line from its environment variable, HYPERFLEET_ and the flag's
// name in upper case with dashes as underscores, when that is set. It returns an error naming the first variable
// whose value the flag refuses.
func BindEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		name := EnvVar(f.Name)
		if v, ok := lookup(name); ok && !f.Changed && err == nil {
			if setErr := f.Value.Set(v); setErr != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, setErr)
			}
		}
	})
	return err
}

// EnvVar is the environment variable of a flag: "db-url" is HYPERFLEET_DB_URL.
func EnvVar(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Logger returns a JSON logger to w at level ("debug", "info", "warn" or "error").
func Logger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// Main executes cmd until SIGINT or SIGTERM and exits: 0, or 1 with the error on stderr after the command's name.
func Main(cmd *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, cmd.Name()+":", err)
		os.Exit(1)
	}
}

// Serve serves h on ln until ctx ends, then shuts down, giving requests in flight 10 seconds.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// Listen listens on addr for Serve.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}
