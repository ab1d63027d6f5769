package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// defaultServer is where `make run` serves the API.
const defaultServer = "http://localhost:8000"

// Environment variables the CLI reads.
const (
	envServer = "HYPERFLEET_SERVER"
	envToken  = "HYPERFLEET_TOKEN" //nolint:gosec // the name of a variable, not a credential
	envConfig = "HYPERFLEET_CONFIG"
)

// configFile is what `hyperfleet login` writes: the server logged in to and the bearer token for it.
type configFile struct {
	Server string `json:"server,omitempty"`
	Token  string `json:"token,omitempty"`
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

// loadConfig reads the configuration file; a missing file is an empty configuration.
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
	return &cfg, nil
}

// saveConfig writes the configuration readable by its owner only, replacing the file in one rename so that a
// failed write never leaves half a token behind.
func saveConfig(path string, cfg *configFile) error {
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode the configuration: %w", err)
	}
	raw = append([]byte("# Written by `hyperfleet login`. It holds a bearer token: keep it private.\n"), raw...)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("write the configuration: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	// CreateTemp makes the file 0600 already; the explicit chmod keeps that true whatever the umask or platform.
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write the configuration: %w", err)
	}
	if _, err := tmp.Write(raw); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write the configuration: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the configuration: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write the configuration: %w", err)
	}
	return nil
}

// endpoint is the server a command talks to and the token it sends (empty: none).
type endpoint struct {
	server, token string
}

// endpoint resolves the server (--server, HYPERFLEET_SERVER, the configuration file, http://localhost:8000) and
// the token (--token, HYPERFLEET_TOKEN, the configuration file). The file's token is sent only to the server it
// was saved for, so that pointing --server elsewhere never hands the token to another host.
func (a *app) endpoint() (endpoint, error) {
	path, err := a.configPath()
	if err != nil {
		return endpoint{}, err
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return endpoint{}, err
	}
	raw := firstOf(a.flags.server, a.getenv(envServer), cfg.Server, defaultServer)
	server, err := normalizeServer(raw)
	if err != nil {
		return endpoint{}, err
	}
	token := firstOf(a.flags.token, a.getenv(envToken))
	if token == "" && cfg.Token != "" {
		if saved, err := normalizeServer(cfg.Server); err == nil && saved == server {
			token = cfg.Token
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

func firstOf(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
