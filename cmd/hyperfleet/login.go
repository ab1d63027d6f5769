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

const loginLong = `Checks a bearer token against the API and saves it, with the server, in the configuration file
($XDG_CONFIG_HOME/hyperfleet/config.yaml or ~/.config/hyperfleet/config.yaml, readable by you only). Later
commands use both unless --server, --token or HYPERFLEET_SERVER/HYPERFLEET_TOKEN say otherwise; the saved token
is only ever sent to the saved server.

The token comes from --token, --token-file, or stdin (typed or pasted without echo on a terminal).`

const loginExample = `  bin/hyperfleet-api token --subject alice --roles user | hyperfleet login
  hyperfleet login --server https://hyperfleet.example.com --token-file ~/fleet.token`

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
	path, err := a.configPath()
	if err != nil {
		return err
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return err
	}
	server, err := normalizeServer(firstOf(a.flags.server, a.getenv(envServer), cfg.Server, defaultServer))
	if err != nil {
		return err
	}
	clusters, err := a.kinds.lookup("clusters")
	if err != nil {
		return err
	}
	// Listing one cluster is the cheapest request every role may make; it proves the token is accepted.
	probe := api.ListClustersParams{Size: ptr(1), Fields: ptr("name")}
	with, err := newClient(server, token, a.httpClient())
	if err != nil {
		return err
	}
	if _, err := with.list(ctx, clusters, uuid.Nil, probe); err != nil {
		var aerr *apiError
		if errors.As(err, &aerr) && aerr.status == http.StatusUnauthorized {
			return fmt.Errorf("the API at %s refused the token: %w", server, err)
		}
		return err
	}
	if err := saveConfig(path, &configFile{Server: server, Token: token}); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Logged in to %s; the token is saved in %s.\n", server, path)
	// The same request without a token tells whether the API checks tokens at all, which a user trying a
	// development server is better told.
	without, err := newClient(server, "", a.httpClient())
	if err != nil {
		return err
	}
	if _, err := without.list(ctx, clusters, uuid.Nil, probe); err == nil {
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
		Short: "Forget the saved token (the saved server stays)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			path, err := a.configPath()
			if err != nil {
				return err
			}
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			if cfg.Token == "" {
				fmt.Fprintln(a.stdout, "Not logged in.")
				return nil
			}
			cfg.Token = ""
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Logged out of %s.\n", cfg.Server)
			return nil
		},
	}
}

func newVersionCommand(a *app) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the CLI's version and the API's",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(a.stdout, "Client: hyperfleet %s (build %s)\n", version, build)
			if clientOnly {
				return nil
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			resp, err := c.gen.GetAPIInfoWithResponse(cmd.Context())
			if err != nil {
				return c.sendError(err)
			}
			if resp.JSON200 == nil {
				return newAPIError(resp.StatusCode(), resp.HTTPResponse.Header.Get("Content-Type"), resp.Body)
			}
			fmt.Fprintf(a.stdout, "Server: hyperfleet-api %s (build %s) at %s\n", resp.JSON200.Version, resp.JSON200.Build, c.server)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "the CLI's version only")
	return cmd
}
