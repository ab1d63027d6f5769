package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEndpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hyperfleet", "config.yaml")
	require.NoError(t, saveConfig(path, &configFile{Server: "http://saved:8000", Token: "saved-token"}))

	tests := []struct {
		name  string
		flags globalFlags
		env   map[string]string
		want  endpoint
	}{
		{"the saved server and token", globalFlags{}, nil, endpoint{"http://saved:8000", "saved-token"}},
		{"the environment's server: no saved token for it", globalFlags{}, map[string]string{envServer: "other:9000"},
			endpoint{"http://other:9000", ""}},
		{"the same server spelled with a slash keeps the token", globalFlags{server: "http://saved:8000/"}, nil,
			endpoint{"http://saved:8000", "saved-token"}},
		{"the environment's token", globalFlags{}, map[string]string{envToken: "env-token"}, endpoint{"http://saved:8000", "env-token"}},
		{"flags win", globalFlags{server: "https://flag", token: "flag-token"}, map[string]string{envServer: "http://env", envToken: "env-token"},
			endpoint{"https://flag", "flag-token"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"XDG_CONFIG_HOME": dir}
			for k, v := range tc.env {
				env[k] = v
			}
			a := newApp(nil, nil, nil, func(k string) string { return env[k] })
			a.flags = tc.flags
			got, err := a.endpoint()
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	t.Run("nothing configured", func(t *testing.T) {
		a := newApp(nil, nil, nil, func(k string) string { return map[string]string{"HOME": t.TempDir()}[k] })
		got, err := a.endpoint()
		require.NoError(t, err)
		require.Equal(t, endpoint{server: defaultServer}, got)
	})

	t.Run("--config and HYPERFLEET_CONFIG", func(t *testing.T) {
		a := newApp(nil, nil, nil, func(k string) string { return map[string]string{envConfig: path}[k] })
		got, err := a.endpoint()
		require.NoError(t, err)
		require.Equal(t, "saved-token", got.token)
		a.flags.config = filepath.Join(dir, "missing.yaml")
		got, err = a.endpoint()
		require.NoError(t, err)
		require.Empty(t, got.token)
	})
}
