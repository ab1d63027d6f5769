package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// app is one invocation of the CLI: its streams, its environment and the global flags. Commands are built from
// it, so nothing lives in package variables and tests run the whole CLI in process.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	kinds          *kindSet
	// transport carries every request of the invocation; run closes its idle connections at the end.
	transport *http.Transport
	flags     globalFlags
	// setupErrs are mistakes made building the command tree (a completion for a flag that does not exist); run
	// reports them rather than running anything.
	setupErrs []error
}

// setup records err, if any, from building the command tree.
func (a *app) setup(err error) {
	if err != nil {
		a.setupErrs = append(a.setupErrs, err)
	}
}

// globalFlags are the flags every command takes.
type globalFlags struct {
	server, token, config string
	requestTimeout        time.Duration
}

func newApp(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *app {
	transport, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		transport = transport.Clone()
	} else {
		transport = &http.Transport{}
	}
	return &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, kinds: newKindSet(), transport: transport}
}

// connect returns a client for the server and token the flags, environment and configuration file name.
func (a *app) connect() (*client, error) {
	ep, err := a.endpoint()
	if err != nil {
		return nil, err
	}
	return newClient(ep.server, ep.token, a.httpClient())
}

func (a *app) httpClient() *http.Client {
	return &http.Client{Transport: a.transport, Timeout: a.flags.requestTimeout}
}

const rootLong = `hyperfleet drives a HyperFleet API: version streams, upgrade schedules, clusters and their node pools.

Resources are named by kind and by name or id:
  hyperfleet get clusters
  hyperfleet get cluster demo -o yaml
  hyperfleet get nodepools --cluster demo --watch
  hyperfleet wait cluster demo --for=phase=Ready --timeout 10m

Kinds: clusters (cl), nodepools (np; children of a cluster: --cluster), versionstreams (vs), upgradeschedules (us).
The server is --server, HYPERFLEET_SERVER or the one "hyperfleet login" saved (default http://localhost:8000);
the bearer token is --token, HYPERFLEET_TOKEN or the saved one. Without a token no Authorization header is sent.`

func newRootCommand(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "hyperfleet",
		Short:         "Drive a HyperFleet API: clusters, node pools, version streams, upgrade schedules",
		Long:          rootLong,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// With Args set, cobra hands an unknown subcommand to it rather than to its own suggestions, so that it
		// becomes a usage error like every other bad command line.
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("hyperfleet {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.flags.server, "server", "", "API URL (default: $HYPERFLEET_SERVER, the logged-in server, or "+defaultServer+")")
	pf.StringVar(&a.flags.token, "token", "", "bearer token (default: $HYPERFLEET_TOKEN or the one saved by hyperfleet login)")
	pf.StringVar(&a.flags.config, "config", "", "configuration file (default: $HYPERFLEET_CONFIG or $XDG_CONFIG_HOME/hyperfleet/config.yaml)")
	pf.DurationVar(&a.flags.requestTimeout, "request-timeout", 30*time.Second, "limit for each request to the API")

	root.AddGroup(&cobra.Group{ID: "resources", Title: "Resource commands:"},
		&cobra.Group{ID: "progress", Title: "Following progress:"},
		&cobra.Group{ID: "setup", Title: "Setup:"})
	for _, c := range []*cobra.Command{
		newGetCommand(a, "get"), newGetCommand(a, "list"), newCreateCommand(a), newApplyCommand(a),
		newPatchCommand(a), newDeleteCommand(a),
	} {
		c.GroupID = "resources"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newStatusesCommand(a), newWaitCommand(a)} {
		c.GroupID = "progress"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newLoginCommand(a), newLogoutCommand(a), newVersionCommand(a)} {
		c.GroupID = "setup"
		root.AddCommand(c)
	}
	root.SetCompletionCommandGroupID("setup")
	root.SetHelpCommandGroupID("setup")
	return root
}

// usageError is a command line the CLI cannot act on; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// usageArgs makes an argument check's failure a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{msg: err.Error()}
		}
		return nil
	}
}

// checkOneOf is a usage error unless at most one of the named flags was given, and, when required, one was.
// (Cobra's own flag groups report plain errors, which would exit 1 rather than 2.)
func checkOneOf(cmd *cobra.Command, required bool, names ...string) error {
	var given []string
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			given = append(given, "--"+n)
		}
	}
	all := "--" + strings.Join(names, ", --")
	switch {
	case len(given) > 1:
		return usageErrorf("%s: give one", strings.Join(given, " and "))
	case required && len(given) == 0:
		return usageErrorf("one of %s is needed", all)
	}
	return nil
}

// Exit statuses.
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitInterrupt = 130 // what shells report for a process ended by SIGINT
)

// report prints err for a person and returns the exit status: the API's problem with its code and field errors,
// a usage error with a pointer to help.
func (a *app) report(cmd *cobra.Command, err error) int {
	var uerr *usageError
	if errors.As(err, &uerr) {
		fmt.Fprintf(a.stderr, "error: %s\nRun '%s --help' for usage.\n", uerr.msg, cmd.CommandPath())
		return exitUsage
	}
	if errors.Is(err, errInterrupted) || errors.Is(err, context.Canceled) {
		fmt.Fprintln(a.stderr, "interrupted")
		return exitInterrupt
	}
	a.printError(err)
	return exitError
}

// printError prints err on stderr, followed by the details of an API error (its field errors, …).
func (a *app) printError(err error) {
	fmt.Fprintf(a.stderr, "error: %v\n", err)
	var aerr *apiError
	if errors.As(err, &aerr) {
		for _, line := range aerr.details() {
			fmt.Fprintf(a.stderr, "  %s\n", line)
		}
	}
}

// errInterrupted ends a command that was stopped by Ctrl-C before it finished.
var errInterrupted = errors.New("interrupted")

// outputFlag is an -o/--output value limited to the formats a command prints.
type outputFlag struct {
	value   string
	allowed []string
}

func (o *outputFlag) String() string { return o.value }

func (o *outputFlag) Type() string { return "format" }

func (o *outputFlag) Set(s string) error {
	if !slices.Contains(o.allowed, s) {
		return fmt.Errorf("want one of %s", strings.Join(o.allowed, ", "))
	}
	o.value = s
	return nil
}

// addOutputFlag adds -o with the given formats, the first being the default ("" prints a message).
func (a *app) addOutputFlag(cmd *cobra.Command, formats ...string) *outputFlag {
	o := &outputFlag{value: formats[0], allowed: formats}
	named := slices.DeleteFunc(slices.Clone(formats), func(s string) bool { return s == "" })
	cmd.Flags().VarP(o, "output", "o", "output format: "+strings.Join(named, "|"))
	a.setup(cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(named, cobra.ShellCompDirectiveNoFileComp)))
	return o
}

// isTerminal reports whether w is a terminal, where progress lines update in place and watched tables redraw.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) //nolint:gosec // a file descriptor fits an int
}
