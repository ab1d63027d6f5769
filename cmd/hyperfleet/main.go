// Command hyperfleet is HyperFleet's command-line client: it creates, changes, lists, watches and deletes the kinds
// of the kind table (api.Kinds) through the generic client, shows the adapters' reports, waits for resources to
// become Ready, and makes raw calls. `hyperfleet --help` lists the commands; docs/cli.md describes them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, api.Kinds(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run executes one command line on the kinds of the table and returns the exit status (exitOK, exitError, …).
// Errors are printed on stderr for a person; a panic is too, without a stack trace.
func run(ctx context.Context, kinds *api.KindTable, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) (code int) {
	a := newApp(kinds, stdin, stdout, stderr, getenv)
	defer a.transport.CloseIdleConnections()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "error: internal error in hyperfleet %s: %v (please report it)\n", command.Version(), r)
			code = exitError
		}
	}()
	root := newRootCommand(a)
	if err := errors.Join(a.setupErrs...); err != nil {
		fmt.Fprintf(stderr, "error: internal error in hyperfleet %s: %v (please report it)\n", command.Version(), err)
		return exitError
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	return a.report(cmd, err)
}
