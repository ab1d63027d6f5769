// Command hyperfleet is HyperFleet's command-line client: it creates, changes, lists, watches and deletes version
// streams, upgrade schedules, clusters and node pools through the API's generated client, shows the adapters'
// reports, and waits for resources to become Ready. `hyperfleet --help` lists the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version and build are set by the linker (-X) in `make build`; they are the only package variables.
var (
	version = "dev"
	build   = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status: 0, 1 for an error, 2 for a usage error. Errors are
// printed on stderr for a person; a panic is too, without a stack trace.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) (code int) {
	a := newApp(stdin, stdout, stderr, getenv)
	defer a.transport.CloseIdleConnections()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "error: internal error in hyperfleet %s: %v (please report it)\n", version, r)
			code = exitError
		}
	}()
	root := newRootCommand(a)
	if err := errors.Join(a.setupErrs...); err != nil {
		fmt.Fprintf(stderr, "error: internal error in hyperfleet %s: %v (please report it)\n", version, err)
		return exitError
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	return a.report(cmd, err)
}
