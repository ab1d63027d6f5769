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

	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// app is one invocation of the CLI: its streams, its environment and the global flags. Commands are built from
// it, so nothing lives in package variables and tests run the whole CLI in process.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	kinds          *api.KindTable
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
	server, token, config, context string
	requestTimeout                 time.Duration
}

func newApp(kinds *api.KindTable, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *app {
	transport, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		transport = transport.Clone()
	} else {
		transport = &http.Transport{}
	}
	return &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, kinds: kinds, transport: transport}
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

// rootLong is the root command's help; %s is the list of kinds.
const rootLong = `hyperfleet drives a HyperFleet API: version streams, upgrade schedules, clusters and their node pools.

Resources are named by kind and by name or id:
  hyperfleet get clusters
  hyperfleet get cluster demo -o yaml
  hyperfleet get nodepools --cluster demo --watch
  hyperfleet wait cluster demo --for=phase=Ready --timeout 10m
  hyperfleet rollout status stable-4-16

Kinds: %s.
The server and token are --server and --token, else HYPERFLEET_SERVER and HYPERFLEET_TOKEN, else the current
context's ("hyperfleet login" saves one; "hyperfleet config" lists and switches them), else http://localhost:8000
without a token. Without a token no Authorization header is sent.

Exit status: 0 done, 1 error, 2 usage error, 3 not found, 4 conflict (a name in use, a stale --if-match).`

func newRootCommand(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "hyperfleet",
		Short:         "Drive a HyperFleet API: clusters, node pools, version streams, upgrade schedules",
		Long:          fmt.Sprintf(rootLong, a.describeKinds()),
		Version:       command.Version(),
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
	pf.StringVar(&a.flags.server, "server", "", "API URL (default: $HYPERFLEET_SERVER, the context's server, or "+defaultServer+")")
	pf.StringVar(&a.flags.token, "token", "", "bearer token (default: $HYPERFLEET_TOKEN or the context's)")
	pf.StringVar(&a.flags.config, "config", "", "configuration file (default: $HYPERFLEET_CONFIG or $XDG_CONFIG_HOME/hyperfleet/config.yaml)")
	pf.StringVar(&a.flags.context, "context", "", "the configuration's context to use (default: $HYPERFLEET_CONTEXT or the current one)")
	a.setup(root.RegisterFlagCompletionFunc("context", a.completeContexts))
	pf.DurationVar(&a.flags.requestTimeout, "request-timeout", 30*time.Second, "limit for each request to the API")

	root.AddGroup(&cobra.Group{ID: "resources", Title: "Resource commands:"},
		&cobra.Group{ID: "progress", Title: "Following progress and raw calls:"},
		&cobra.Group{ID: "setup", Title: "Setup:"})
	for _, c := range []*cobra.Command{
		newGetCommand(a, "get"), newGetCommand(a, "list"), newCreateCommand(a), newApplyCommand(a),
		newPatchCommand(a), newDeleteCommand(a), newTenantCommand(a),
	} {
		c.GroupID = "resources"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newStatusesCommand(a), newHistoryCommand(a), newWaitCommand(a), newRolloutCommand(a), newAPICommand(a)} {
		c.GroupID = "progress"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newLoginCommand(a), newLogoutCommand(a), newConfigCommand(a), newVersionCommand(a)} {
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

// Exit statuses (documented in docs/cli.md and the root command's help).
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitNotFound  = 3   // the resource, or the API's answer, is 404
	exitConflict  = 4   // the API's 409 (a name in use, a deleting parent, a stale report) or 412 (a stale --if-match)
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
	return exitCode(err)
}

// exitCode is the exit status of a command that failed with err (not a usage error): 3 for what is not there, 4
// for a conflict, else 1.
func exitCode(err error) int {
	var nf *notFoundError
	var aerr *apiError
	switch {
	case errors.As(err, &nf):
		return exitNotFound
	case errors.As(err, &aerr) && aerr.status == http.StatusNotFound:
		return exitNotFound
	case errors.As(err, &aerr) && (aerr.status == http.StatusConflict || aerr.status == http.StatusPreconditionFailed):
		return exitConflict
	}
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
	name, _, templated := strings.Cut(s, "=")
	if !slices.Contains(o.allowed, s) && (!templated || !slices.Contains(o.allowed, name+"=")) {
		return fmt.Errorf("want one of %s", strings.Join(o.named(), ", "))
	}
	o.value = s
	return nil
}

// named are the formats as help shows them: "jsonpath=…" for a templated one.
func (o *outputFlag) named() []string {
	var out []string
	for _, f := range o.allowed {
		if f == "" {
			continue
		}
		if strings.HasSuffix(f, "=") {
			f += "…"
		}
		out = append(out, f)
	}
	return out
}

// addOutputFlag adds -o with the given formats, the first being the default ("" prints a message).
func (a *app) addOutputFlag(cmd *cobra.Command, formats ...string) *outputFlag {
	o := &outputFlag{value: formats[0], allowed: formats}
	cmd.Flags().VarP(o, "output", "o", "output format: "+strings.Join(o.named(), "|"))
	a.setup(cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(o.named(), cobra.ShellCompDirectiveNoFileComp)))
	return o
}

// isTerminal reports whether w is a terminal, where progress lines update in place and watched tables redraw.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) //nolint:gosec // a file descriptor fits an int
}
