package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/internal/atomicfile"
)

// defaultServer is where `make run` serves the API.
const defaultServer = "http://localhost:8000"

// Environment variables the CLI reads.
const (
	envServer  = "HYPERFLEET_SERVER"
	envToken   = "HYPERFLEET_TOKEN" //nolint:gosec // the name of a variable, not a credential
	envConfig  = "HYPERFLEET_CONFIG"
	envContext = "HYPERFLEET_CONTEXT"
)

// configFile is the CLI's configuration, as kubectl's kubeconfig keeps clusters: named contexts, each a server and
// the bearer token for it, and the one commands use unless told otherwise. `hyperfleet login` writes a context;
// `hyperfleet config` lists, switches, renames and removes them.
//
// The file of earlier versions held one server and token at the top level (Server, Token): loadConfig reads it
// as the context "default" and writes it back in this form.
type configFile struct {
	CurrentContext string          `json:"current-context,omitempty"`
	Contexts       []configContext `json:"contexts,omitempty"`

	// Server and Token are the file of earlier versions; never written.
	Server string `json:"server,omitempty"`
	Token  string `json:"token,omitempty"`
}

// configContext is one server and the token for it.
type configContext struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	Token  string `json:"token,omitempty"`
}

// legacyContext is the name of the context an earlier version's file becomes.
const legacyContext = "default"

// context returns the named context, or nil.
func (c *configFile) context(name string) *configContext {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i]
		}
	}
	return nil
}

// setContext adds or replaces a context.
func (c *configFile) setContext(ctx configContext) {
	if have := c.context(ctx.Name); have != nil {
		*have = ctx
		return
	}
	c.Contexts = append(c.Contexts, ctx)
}

// removeContext removes the named context and reports whether it was there; the current context is unset with it.
func (c *configFile) removeContext(name string) bool {
	n := len(c.Contexts)
	c.Contexts = slices.DeleteFunc(c.Contexts, func(x configContext) bool { return x.Name == name })
	if c.CurrentContext == name {
		c.CurrentContext = ""
	}
	return len(c.Contexts) < n
}

// configPath is --config, else HYPERFLEET_CONFIG, else hyperfleet/config.yaml under $XDG_CONFIG_HOME or ~/.config.
func (a *app) configPath() (string, error) {
	if a.flags.config != "" {
		return a.flags.config, nil
	}
	if p := a.getenv(envConfig); p != "" {
		return p, nil
	}
	if dir := a.getenv("XDG_CONFIG_HOME"); dir != "" {
		return filepath.Join(dir, "hyperfleet", "config.yaml"), nil
	}
	home := a.getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("no configuration directory (set XDG_CONFIG_HOME or --config): %w", err)
		}
	}
	return filepath.Join(home, ".config", "hyperfleet", "config.yaml"), nil
}

// loadConfig reads the configuration file; a missing file is an empty configuration. A file of an earlier version
// (one server and token) is migrated: rewritten as the context "default", made current.
func loadConfig(path string) (*configFile, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &configFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the configuration: %w", err)
	}
	var cfg configFile
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return nil, fmt.Errorf("configuration %s: %w", path, err)
	}
	if cfg.Server == "" && cfg.Token == "" {
		return &cfg, nil
	}
	if cfg.context(legacyContext) == nil {
		cfg.setContext(configContext{Name: legacyContext, Server: cfg.Server, Token: cfg.Token})
	}
	if cfg.CurrentContext == "" {
		cfg.CurrentContext = legacyContext
	}
	cfg.Server, cfg.Token = "", ""
	if err := saveConfig(path, &cfg); err != nil {
		return nil, fmt.Errorf("migrate the configuration to contexts: %w", err)
	}
	return &cfg, nil
}

// saveConfig writes the configuration readable by its owner only, replacing the file in one rename so that a
// failed write never leaves half a token behind.
func saveConfig(path string, cfg *configFile) error {
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode the configuration: %w", err)
	}
	raw = append([]byte("# Written by `hyperfleet login` and `hyperfleet config`. It holds bearer tokens: keep it private.\n"), raw...)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := atomicfile.WriteFile(path, raw, 0o600); err != nil {
		return fmt.Errorf("write the configuration: %w", err)
	}
	return nil
}

// endpoint is the server a command talks to and the token it sends (empty: none).
type endpoint struct {
	server, token string
}

// contextName is the context commands use: --context, else HYPERFLEET_CONTEXT, else the file's current one.
func (a *app) contextName(cfg *configFile) string {
	return firstOf(a.flags.context, a.getenv(envContext), cfg.CurrentContext)
}

// endpoint resolves the server (--server, HYPERFLEET_SERVER, the context's, http://localhost:8000) and the token
// (--token, HYPERFLEET_TOKEN, the context's). A context's token is sent only to the context's server, so that
// pointing --server elsewhere never hands the token to another host. Naming a context that does not exist is a
// usage error.
func (a *app) endpoint() (endpoint, error) {
	path, err := a.configPath()
	if err != nil {
		return endpoint{}, err
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return endpoint{}, err
	}
	saved := &configContext{}
	if name := a.contextName(cfg); name != "" {
		if saved = cfg.context(name); saved == nil {
			return endpoint{}, usageErrorf("no context %q in %s: `hyperfleet config get-contexts` lists them", name, path)
		}
	}
	server, err := normalizeServer(firstOf(a.flags.server, a.getenv(envServer), saved.Server, defaultServer))
	if err != nil {
		return endpoint{}, err
	}
	token := firstOf(a.flags.token, a.getenv(envToken))
	if token == "" && saved.Token != "" {
		if savedServer, err := normalizeServer(saved.Server); err == nil && savedServer == server {
			token = saved.Token
		}
	}
	return endpoint{server: server, token: strings.TrimSpace(token)}, nil
}

// normalizeServer accepts "host:port" for "http://host:port" and drops a trailing slash.
func normalizeServer(s string) (string, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", usageErrorf("server %q is not an http(s) URL", s)
	}
	return s, nil
}

// contextFor names the context of a server that login saves without --context: its host and port, as kubectl
// names the clusters of a kubeconfig ("localhost-8000").
func contextFor(server string) string {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return legacyContext
	}
	return strings.NewReplacer(":", "-", "[", "", "]", "").Replace(u.Host)
}

func firstOf(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

const configLong = `Shows and changes the configuration file's contexts: each a server and the bearer token for it, as kubectl's
kubeconfig keeps clusters. Commands use the current context unless --context or HYPERFLEET_CONTEXT names another,
and --server, --token, HYPERFLEET_SERVER and HYPERFLEET_TOKEN win over it. "hyperfleet login" checks a token and
saves it as a context. A file written by an earlier version (one server and token) becomes the context "default".`

func newConfigCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config SUBCOMMAND",
		Short: "Show and switch contexts: several servers, each with its token, in one configuration file",
		Long:  configLong,
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	names := func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return a.completeContexts(nil, nil, toComplete)
	}
	var server, token string
	set := &cobra.Command{
		Use:   "set-context NAME [--server URL] [--token TOKEN]",
		Short: "Add a context or change one's server or token (without checking the token: login does)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.editConfig(func(cfg *configFile) (string, error) {
				ctx := configContext{Name: args[0], Server: defaultServer}
				if have := cfg.context(args[0]); have != nil {
					ctx = *have
				}
				if cmd.Flags().Changed("server") {
					s, err := normalizeServer(server)
					if err != nil {
						return "", err
					}
					if s != ctx.Server {
						ctx.Token = "" // a token goes only to the server it was saved for
					}
					ctx.Server = s
				}
				if cmd.Flags().Changed("token") {
					ctx.Token = strings.TrimSpace(token)
				}
				cfg.setContext(ctx)
				return fmt.Sprintf("Context %q is %s.", ctx.Name, ctx.Server), nil
			})
		},
	}
	// Not the persistent --server and --token: these are what the context saves, not what this command talks to.
	set.Flags().StringVar(&server, "server", "", "the context's server")
	set.Flags().StringVar(&token, "token", "", "the context's bearer token")
	cmd.AddCommand(
		&cobra.Command{
			Use: "get-contexts", Short: "List the contexts; * marks the current one", Args: usageArgs(cobra.NoArgs),
			RunE: func(*cobra.Command, []string) error { return a.getContexts() },
		},
		&cobra.Command{
			Use: "current-context", Short: "Show the current context's name", Args: usageArgs(cobra.NoArgs),
			RunE: func(*cobra.Command, []string) error {
				_, cfg, err := a.loadConfigFile()
				if err != nil {
					return err
				}
				name := a.contextName(cfg)
				if name == "" {
					return errors.New("no current context: `hyperfleet login` or `hyperfleet config use-context NAME` sets one")
				}
				fmt.Fprintln(a.stdout, name)
				return nil
			},
		},
		&cobra.Command{
			Use: "use-context NAME", Short: "Make a context the current one", Args: usageArgs(cobra.ExactArgs(1)), ValidArgsFunction: names,
			RunE: func(_ *cobra.Command, args []string) error {
				return a.editConfig(func(cfg *configFile) (string, error) {
					if cfg.context(args[0]) == nil {
						return "", &notFoundError{what: "context", name: args[0]}
					}
					cfg.CurrentContext = args[0]
					return fmt.Sprintf("Switched to context %q.", args[0]), nil
				})
			},
		},
		set,
		&cobra.Command{
			Use: "rename-context OLD NEW", Short: "Rename a context", Args: usageArgs(cobra.ExactArgs(2)), ValidArgsFunction: names,
			RunE: func(_ *cobra.Command, args []string) error {
				return a.editConfig(func(cfg *configFile) (string, error) {
					ctx := cfg.context(args[0])
					if ctx == nil {
						return "", &notFoundError{what: "context", name: args[0]}
					}
					if cfg.context(args[1]) != nil {
						return "", usageErrorf("context %q exists already", args[1])
					}
					ctx.Name = args[1]
					if cfg.CurrentContext == args[0] {
						cfg.CurrentContext = args[1]
					}
					return fmt.Sprintf("Context %q renamed to %q.", args[0], args[1]), nil
				})
			},
		},
		&cobra.Command{
			Use: "delete-context NAME", Short: "Remove a context and its token", Args: usageArgs(cobra.ExactArgs(1)), ValidArgsFunction: names,
			RunE: func(_ *cobra.Command, args []string) error {
				return a.editConfig(func(cfg *configFile) (string, error) {
					if !cfg.removeContext(args[0]) {
						return "", &notFoundError{what: "context", name: args[0]}
					}
					return fmt.Sprintf("Deleted context %q.", args[0]), nil
				})
			},
		},
		&cobra.Command{
			Use: "view", Short: "Show the configuration, tokens hidden", Args: usageArgs(cobra.NoArgs),
			RunE: func(*cobra.Command, []string) error {
				_, cfg, err := a.loadConfigFile()
				if err != nil {
					return err
				}
				for i := range cfg.Contexts {
					if cfg.Contexts[i].Token != "" {
						cfg.Contexts[i].Token = "REDACTED"
					}
				}
				raw, err := yaml.Marshal(cfg)
				if err != nil {
					return err
				}
				_, err = a.stdout.Write(raw)
				return err
			},
		},
	)
	return cmd
}

// loadConfigFile reads the configuration file (migrating an earlier version's).
func (a *app) loadConfigFile() (string, *configFile, error) {
	path, err := a.configPath()
	if err != nil {
		return "", nil, err
	}
	cfg, err := loadConfig(path)
	return path, cfg, err
}

// editConfig changes the configuration file with change, which returns the line to print.
func (a *app) editConfig(change func(*configFile) (string, error)) error {
	path, cfg, err := a.loadConfigFile()
	if err != nil {
		return err
	}
	msg, err := change(cfg)
	if err != nil {
		return err
	}
	if err := saveConfig(path, cfg); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, msg)
	return nil
}

// getContexts prints CURRENT, NAME, SERVER and AUTH (whether a token is saved) of each context.
func (a *app) getContexts() error {
	_, cfg, err := a.loadConfigFile()
	if err != nil {
		return err
	}
	current := a.contextName(cfg)
	tw := newTable(a.stdout)
	fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tAUTH")
	for _, c := range cfg.Contexts {
		mark, auth := "", "none"
		if c.Name == current {
			mark = "*"
		}
		if c.Token != "" {
			auth = "token"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, c.Name, c.Server, auth)
	}
	return tw.Flush()
}

// completeContexts completes a context's name.
func (a *app) completeContexts(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	_, cfg, err := a.loadConfigFile()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, c := range cfg.Contexts {
		names = append(names, c.Name)
	}
	return filterPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
}
