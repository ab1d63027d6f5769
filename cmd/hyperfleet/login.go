package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

type loginOptions struct{ tokenFile string }

const loginLong = `Checks a bearer token against the API and saves it, with the server, as a context of the configuration
file ($XDG_CONFIG_HOME/hyperfleet/config.yaml or ~/.config/hyperfleet/config.yaml, readable by you only), and makes
that context the current one. The context is --context, or the current one when it is for the same server, or else
is named after the server's host and port. Later commands use it unless --server, --token or
HYPERFLEET_SERVER/HYPERFLEET_TOKEN say otherwise; a saved token is only ever sent to its context's server.

The token comes from --token, --token-file, or stdin (typed or pasted without echo on a terminal).`

const loginExample = `  bin/hyperfleet-api token --subject alice --roles user | hyperfleet login
  hyperfleet login --server https://hyperfleet.example.com --token-file ~/fleet.token --context prod`

func newLoginCommand(a *app) *cobra.Command {
	o := &loginOptions{}
	cmd := &cobra.Command{
		Use:     "login [--server URL] [--token TOKEN | --token-file FILE]",
		Short:   "Check a token against the API and save it for later commands",
		Long:    loginLong,
		Example: loginExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.login(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.tokenFile, "token-file", "", "file holding the token")
	return cmd
}

func (a *app) login(ctx context.Context, o *loginOptions) error {
	token := a.flags.token
	switch {
	case o.tokenFile != "" && token != "":
		return usageErrorf("--token and --token-file: give one")
	case o.tokenFile != "":
		raw, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return fmt.Errorf("read the token: %w", err)
		}
		token = string(raw)
	case token == "":
		var err error
		if token, err = a.readToken(); err != nil {
			return err
		}
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return usageErrorf("no token: give --token, --token-file or one on stdin")
	}
	path, cfg, err := a.loadConfigFile()
	if err != nil {
		return err
	}
	current := cfg.context(a.contextName(cfg))
	if current == nil {
		current = &configContext{}
	}
	server, err := normalizeServer(firstOf(a.flags.server, a.getenv(envServer), current.Server, defaultServer))
	if err != nil {
		return err
	}
	name := a.flags.context
	if name == "" {
		name = contextFor(server)
		if have, err := normalizeServer(current.Server); err == nil && have == server {
			name = current.Name // logging in again to the current context's server renews its token
		}
	}
	// Listing one resource of the first kind is the cheapest request every role may make; it proves the token is
	// accepted.
	probeKind := a.kinds.All()[0]
	probe := api.ListParams{Size: ptr(1), Fields: ptr("name")}
	with, err := newClient(server, token, a.httpClient())
	if err != nil {
		return err
	}
	if _, err := with.list(ctx, probeKind, uuid.Nil, probe); err != nil {
		var aerr *apiError
		if errors.As(err, &aerr) && aerr.status == http.StatusUnauthorized {
			return fmt.Errorf("the API at %s refused the token: %w", server, err)
		}
		return err
	}
	cfg.setContext(configContext{Name: name, Server: server, Token: token})
	cfg.CurrentContext = name
	if err := saveConfig(path, cfg); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Logged in to %s; the token is saved in %s as context %q, the current one.\n", server, path, name)
	// The same request without a token tells whether the API checks tokens at all, which a user trying a
	// development server is better told.
	without, err := newClient(server, "", a.httpClient())
	if err != nil {
		return err
	}
	if _, err := without.list(ctx, probeKind, uuid.Nil, probe); err == nil {
		fmt.Fprintf(a.stderr, "note: the API at %s runs without authentication; it accepts any token and none.\n", server)
	}
	return nil
}

// readToken reads a token from stdin: without echo after a prompt on a terminal, else the whole input.
func (a *app) readToken() (string, error) {
	if f, ok := a.stdin.(*os.File); ok && isTerminal(f) {
		fmt.Fprint(a.stderr, "Token: ")
		raw, err := term.ReadPassword(int(f.Fd())) //nolint:gosec // a file descriptor fits an int
		fmt.Fprintln(a.stderr)
		if err != nil {
			return "", fmt.Errorf("read the token: %w", err)
		}
		return string(raw), nil
	}
	raw, err := io.ReadAll(io.LimitReader(a.stdin, 64<<10))
	if err != nil {
		return "", fmt.Errorf("read the token from stdin: %w", err)
	}
	return string(raw), nil
}

func newLogoutCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the current context's token (the context and its server stay)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			path, cfg, err := a.loadConfigFile()
			if err != nil {
				return err
			}
			ctx := cfg.context(a.contextName(cfg))
			if ctx == nil || ctx.Token == "" {
				fmt.Fprintln(a.stdout, "Not logged in.")
				return nil
			}
			ctx.Token = ""
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Logged out of %s (context %q).\n", ctx.Server, ctx.Name)
			return nil
		},
	}
}
