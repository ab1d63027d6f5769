package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// testApp is an app over an environment of the test's.
func testApp(env map[string]string) *app {
	return newApp(api.Kinds(), nil, nil, nil, func(k string) string { return env[k] })
}

func TestEndpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hyperfleet", "config.yaml")
	require.NoError(t, saveConfig(path, &configFile{CurrentContext: "saved", Contexts: []configContext{
		{Name: "saved", Server: "http://saved:8000", Token: "saved-token"},
		{Name: "prod", Server: "https://prod.example.com", Token: "prod-token"},
	}}))

	tests := []struct {
		name  string
		flags globalFlags
		env   map[string]string
		want  endpoint
	}{
		{"the current context's server and token", globalFlags{}, nil, endpoint{"http://saved:8000", "saved-token"}},
		{"the environment's server: no saved token for it", globalFlags{}, map[string]string{envServer: "other:9000"},
			endpoint{"http://other:9000", ""}},
		{"the same server spelled with a slash keeps the token", globalFlags{server: "http://saved:8000/"}, nil,
			endpoint{"http://saved:8000", "saved-token"}},
		{"the environment's token", globalFlags{}, map[string]string{envToken: "env-token"}, endpoint{"http://saved:8000", "env-token"}},
		{"flags win", globalFlags{server: "https://flag", token: "flag-token"}, map[string]string{envServer: "http://env", envToken: "env-token"},
			endpoint{"https://flag", "flag-token"}},
		{"--context", globalFlags{context: "prod"}, nil, endpoint{"https://prod.example.com", "prod-token"}},
		{"HYPERFLEET_CONTEXT", globalFlags{}, map[string]string{envContext: "prod"}, endpoint{"https://prod.example.com", "prod-token"}},
		{"--context wins over HYPERFLEET_CONTEXT", globalFlags{context: "saved"}, map[string]string{envContext: "prod"},
			endpoint{"http://saved:8000", "saved-token"}},
		{"another context's token never goes to the current server", globalFlags{context: "prod", server: "http://saved:8000"}, nil,
			endpoint{"http://saved:8000", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"XDG_CONFIG_HOME": dir}
			for k, v := range tc.env {
				env[k] = v
			}
			a := testApp(env)
			a.flags = tc.flags
			got, err := a.endpoint()
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	t.Run("a context that does not exist", func(t *testing.T) {
		a := testApp(map[string]string{"XDG_CONFIG_HOME": dir})
		a.flags.context = "staging"
		_, err := a.endpoint()
		var uerr *usageError
		require.ErrorAs(t, err, &uerr)
		require.Contains(t, err.Error(), `no context "staging"`)
	})

	t.Run("nothing configured", func(t *testing.T) {
		got, err := testApp(map[string]string{"HOME": t.TempDir()}).endpoint()
		require.NoError(t, err)
		require.Equal(t, endpoint{server: defaultServer}, got)
	})

	t.Run("--config and HYPERFLEET_CONFIG", func(t *testing.T) {
		a := testApp(map[string]string{envConfig: path})
		got, err := a.endpoint()
		require.NoError(t, err)
		require.Equal(t, "saved-token", got.token)
		a.flags.config = filepath.Join(dir, "missing.yaml")
		got, err = a.endpoint()
		require.NoError(t, err)
		require.Empty(t, got.token)
	})
}

// A configuration file of an earlier version (one server and token) is migrated to the context "default" the
// first time it is read, and keeps working.
func TestAnEarlierConfigurationIsMigrated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hyperfleet", "config.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte("# Written by `hyperfleet login`.\nserver: http://old:8000\ntoken: old-token\n"), 0o600))

	got, err := testApp(map[string]string{"XDG_CONFIG_HOME": dir}).endpoint()
	require.NoError(t, err)
	require.Equal(t, endpoint{"http://old:8000", "old-token"}, got)

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var cfg configFile
	require.NoError(t, yaml.UnmarshalStrict(raw, &cfg))
	require.Equal(t, configFile{CurrentContext: "default", Contexts: []configContext{{Name: "default", Server: "http://old:8000", Token: "old-token"}}}, cfg)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the rewritten file stays private")
}

// The config commands list, switch, add, rename and remove contexts, and say what is not there with exit 3.
func TestConfigCommands(t *testing.T) {
	dir := t.TempDir()
	c := &cli{env: map[string]string{"XDG_CONFIG_HOME": dir, "HOME": dir}, kinds: api.Kinds()}
	require.Contains(t, c.fails(t, exitError, "config", "current-context"), "no current context")

	require.Equal(t, "Context \"dev\" is http://localhost:8000.\n", c.ok(t, "config", "set-context", "dev", "--server", "localhost:8000", "--token", "t1"))
	require.Equal(t, "Context \"prod\" is https://prod.example.com.\n", c.ok(t, "config", "set-context", "prod", "--server", "https://prod.example.com"))
	require.Equal(t, "Switched to context \"dev\".\n", c.ok(t, "config", "use-context", "dev"))
	require.Equal(t, "dev\n", c.ok(t, "config", "current-context"))
	require.Equal(t, "prod\n", c.ok(t, "config", "current-context", "--context", "prod"))
	require.Regexp(t, regexp.MustCompile(`^CURRENT\s+NAME\s+SERVER\s+AUTH\n\*\s+dev\s+http://localhost:8000\s+token\n\s+prod\s+https://prod\.example\.com\s+none\n$`),
		c.ok(t, "config", "get-contexts"))

	view := c.ok(t, "config", "view")
	require.NotContains(t, view, "t1", "view hides tokens")
	require.Contains(t, view, "token: REDACTED")

	// A new server for a context drops its token: a token goes only to the server it was saved for.
	c.ok(t, "config", "set-context", "dev", "--server", "http://localhost:9000")
	require.Regexp(t, `\*\s+dev\s+http://localhost:9000\s+none`, c.ok(t, "config", "get-contexts"))

	require.Equal(t, "Context \"dev\" renamed to \"local\".\n", c.ok(t, "config", "rename-context", "dev", "local"))
	require.Equal(t, "local\n", c.ok(t, "config", "current-context"), "the current context follows its rename")
	require.Contains(t, c.fails(t, exitUsage, "config", "rename-context", "local", "prod"), `context "prod" exists already`)
	require.Contains(t, c.fails(t, exitNotFound, "config", "use-context", "staging"), `context "staging" not found`)
	require.Equal(t, "Deleted context \"local\".\n", c.ok(t, "config", "delete-context", "local"))
	require.Contains(t, c.fails(t, exitNotFound, "config", "delete-context", "local"), "not found")
	require.Contains(t, c.fails(t, exitError, "config", "current-context"), "no current context")
	require.Contains(t, c.fails(t, exitUsage, "get", "clusters", "--context", "local"), `no context "local"`)
}
