package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/internal/auth"
)

func TestLoginSavesACheckedToken(t *testing.T) {
	t.Parallel()
	s := startAPI(t, true)
	c := newCLI(t, s)
	configPath := filepath.Join(c.env["XDG_CONFIG_HOME"], "hyperfleet", "config.yaml")
	alice := s.mint("alice", auth.RoleUser, auth.RolePlatform) // platform: the tests create version streams as her
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(alice+"\n"), 0o600))

	t.Run("without a token the API says how to get one", func(t *testing.T) {
		errOut := c.fails(t, exitError, "get", "clusters")
		require.Contains(t, errOut, "error: HYPERFLEET-AUT-001 (401 Unauthorized)")
		require.Contains(t, errOut, "hyperfleet login")
	})

	t.Run("a bad token is refused and not saved", func(t *testing.T) {
		errOut := c.fails(t, exitError, "login", "--token", "not-a-jwt")
		require.Contains(t, errOut, "refused the token: HYPERFLEET-AUT-001")
		require.NoFileExists(t, configPath)
	})

	t.Run("login", func(t *testing.T) {
		tests := []struct {
			name  string
			args  []string
			stdin string
		}{
			{"from a file", []string{"login", "--token-file", tokenFile}, ""},
			{"from stdin", []string{"login"}, alice + "\n"},
			{"from the flag", []string{"login", "--token", alice}, ""},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r := c.runWith(t, testContext(t), tc.stdin, tc.args...)
				require.Equal(t, exitOK, r.code, "stderr: %s", r.err)
				require.Equal(t, "Logged in to "+s.url+"; the token is saved in "+configPath+" as context \""+contextFor(s.url)+"\", the current one.\n", r.out)
				info, err := os.Stat(configPath)
				require.NoError(t, err)
				require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
				var saved configFile
				raw, err := os.ReadFile(configPath)
				require.NoError(t, err)
				require.NoError(t, yaml.Unmarshal(raw, &saved))
				require.Equal(t, configFile{CurrentContext: contextFor(s.url), Contexts: []configContext{{Name: contextFor(s.url), Server: s.url, Token: alice}}}, saved)
			})
		}
	})

	t.Run("later commands use the saved server and token", func(t *testing.T) {
		other := &cli{env: map[string]string{"XDG_CONFIG_HOME": c.env["XDG_CONFIG_HOME"]}, kinds: c.kinds} // no HYPERFLEET_SERVER
		other.seedStream(t, "stable-4-16")
		require.Contains(t, other.ok(t, "get", "vs"), "stable-4-16")
		require.Contains(t, other.ok(t, "version"), "Server: hyperfleet-api test (build test-build) at "+s.url)
	})

	t.Run("the saved token goes to the saved server only", func(t *testing.T) {
		sameHostOtherName := strings.Replace(s.url, "127.0.0.1", "localhost", 1)
		require.Contains(t, c.fails(t, exitError, "get", "vs", "--server", sameHostOtherName), "HYPERFLEET-AUT-001")
		require.Contains(t, c.ok(t, "get", "vs", "--server", sameHostOtherName, "--token", alice), "stable-4-16")
	})

	t.Run("the environment's token wins over the saved one", func(t *testing.T) {
		viewer := &cli{env: map[string]string{"XDG_CONFIG_HOME": c.env["XDG_CONFIG_HOME"], "HYPERFLEET_TOKEN": s.mint("vera", auth.RoleViewer)}, kinds: c.kinds}
		require.Contains(t, viewer.fails(t, exitError, "create", "vs", "fast-4-17", "--spec", `{"target_version": "4.17"}`),
			"HYPERFLEET-AUZ-001 (403 Forbidden)")
	})

	t.Run("logout", func(t *testing.T) {
		require.Equal(t, "Logged out of "+s.url+" (context \""+contextFor(s.url)+"\").\n", c.ok(t, "logout"))
		require.Contains(t, c.fails(t, exitError, "get", "vs"), "HYPERFLEET-AUT-001")
		require.Equal(t, "Not logged in.\n", c.ok(t, "logout"))
	})
}

func TestLoginToAnAPIWithoutAuthentication(t *testing.T) {
	t.Parallel()
	s := startAPI(t, false)
	c := newCLI(t, s)
	r := c.runWith(t, testContext(t), "anything", "login")
	require.Equal(t, exitOK, r.code, "stderr: %s", r.err)
	require.Contains(t, r.err, "runs without authentication")
	require.Contains(t, c.fails(t, exitUsage, "login", "--token", "a", "--token-file", "b"), "give one")
	require.Contains(t, c.runWith(t, testContext(t), "  \n", "login").err, "no token")
}
