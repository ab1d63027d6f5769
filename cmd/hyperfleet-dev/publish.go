package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
)

// publishConfig is what `hyperfleet-dev publish` is configured with.
type publishConfig struct {
	cincinnatiURL string
	groups        []string
	arches        []string
	payload       string
}

func publishCommand() *cobra.Command {
	cfg := publishConfig{
		cincinnatiURL: "http://127.0.0.1:9400",
		groups:        []string{"stable", "fast", "candidate", "eus"},
		arches:        []string{"amd64"},
	}
	cmd := &cobra.Command{
		Use:   "publish MINOR|VERSION",
		Short: "Publish a new OpenShift release in the Cincinnati simulator",
		Long: `Publishes a release in cincinnati-sim, as Red Hat publishes a patch: to every channel of the given groups that
already serves releases of its minor (e.g. stable-4.16, and stable-4.17, which lists 4.16 releases as upgrade
sources), for each --arch. Given a minor (4.16), it publishes the patch after the highest one stable-<minor>
serves. The simulator keeps published releases across restarts (its --state-file). The version resolver finds
the release at its next check, and clusters on a VersionStream of that minor roll to it inside their
UpgradeSchedule. The version goes to stdout (VERSION=$(hyperfleet-dev publish 4.16)), where it went to stderr.`,
		Example: "  hyperfleet-dev publish 4.16\n  hyperfleet-dev publish 4.16.5 --arch amd64 --arch arm64",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPublish(cmd.Context(), cfg, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.cincinnatiURL, "cincinnati-url", cfg.cincinnatiURL, "the simulator's base URL")
	fs.StringSliceVar(&cfg.groups, "channel-groups", cfg.groups, "channel groups to publish to")
	fs.StringSliceVar(&cfg.arches, "arch", cfg.arches, "architectures to publish for")
	fs.StringVar(&cfg.payload, "payload", "", "release image (default: a digest the simulator derives from version and arch)")
	return cmd
}

// runPublish publishes what, prints the version on out and where it went on info.
func runPublish(ctx context.Context, cfg publishConfig, what string, out, info io.Writer) error {
	sim := &simClient{base: strings.TrimRight(cfg.cincinnatiURL, "/"), http: &http.Client{Timeout: 10 * time.Second}}
	major, minor, version, err := parseRelease(what)
	if err != nil {
		return err
	}
	if len(cfg.arches) == 0 || len(cfg.groups) == 0 {
		return errors.New("--arch and --channel-groups must name at least one")
	}
	prefix := fmt.Sprintf("%d.%d.", major, minor)
	if version == "" {
		next, err := sim.nextPatch(ctx, fmt.Sprintf("stable-%d.%d", major, minor), cfg.arches[0], prefix)
		if err != nil {
			return err
		}
		version = next
	}
	var done []string
	for _, arch := range cfg.arches {
		for _, m := range []int{minor, minor + 1} {
			for _, group := range cfg.groups {
				channel := fmt.Sprintf("%s-%d.%d", group, major, m)
				g, ok, err := sim.graph(ctx, channel, arch)
				if err != nil {
					return err
				}
				if !ok || !servesMinor(g, prefix) {
					continue
				}
				if err := sim.publish(ctx, cincinnatisim.PublishRequest{Channel: channel, Arch: arch, Version: version, Payload: cfg.payload}); err != nil {
					return err
				}
				done = append(done, channel+"/"+arch)
			}
		}
	}
	if len(done) == 0 {
		return fmt.Errorf("no channel of the groups %s serves %d.%d releases on %s", strings.Join(cfg.groups, ", "), major, minor,
			strings.Join(cfg.arches, ", "))
	}
	payload := cfg.payload
	if payload == "" {
		payload = cincinnatisim.PayloadFor(version, cfg.arches[0])
	}
	_, _ = fmt.Fprintf(info, "published %s (%s) to %s\n", version, payload, strings.Join(done, ", "))
	_, err = fmt.Fprintln(out, version)
	return err
}

// parseRelease reads "4.16" (version empty: the next patch) or "4.16.3".
func parseRelease(what string) (major, minor int, version string, err error) {
	parts := strings.Split(what, ".")
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, convErr := strconv.Atoi(p)
		if convErr != nil || n < 0 || p != strconv.Itoa(n) {
			nums = nil
			break
		}
		nums[i] = n
	}
	switch len(nums) {
	case 2:
		return nums[0], nums[1], "", nil
	case 3:
		return nums[0], nums[1], what, nil
	}
	return 0, 0, "", fmt.Errorf("%q: want a minor (4.16) or a version (4.16.3)", what)
}

// servesMinor reports whether g holds a release whose version starts with prefix ("4.16.").
func servesMinor(g cincinnatisim.Graph, prefix string) bool {
	for _, n := range g.Nodes {
		if strings.HasPrefix(n.Version, prefix) {
			return true
		}
	}
	return false
}

// simClient speaks to cincinnati-sim.
type simClient struct {
	base string
	http *http.Client
}

// graph returns the graph of channel on arch, and false when the simulator serves none.
func (c *simClient) graph(ctx context.Context, channel, arch string) (cincinnatisim.Graph, bool, error) {
	q := url.Values{"channel": {channel}, "arch": {arch}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+cincinnatisim.GraphPath+"?"+q.Encode(), http.NoBody)
	if err != nil {
		return cincinnatisim.Graph{}, false, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return cincinnatisim.Graph{}, false, fmt.Errorf("is cincinnati-sim running at %s? %w", c.base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusBadRequest {
		return cincinnatisim.Graph{}, false, nil // an unknown channel or arch
	}
	if resp.StatusCode != http.StatusOK {
		return cincinnatisim.Graph{}, false, fmt.Errorf("graph of %s/%s: %s", channel, arch, resp.Status)
	}
	var g cincinnatisim.Graph
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&g); err != nil {
		return cincinnatisim.Graph{}, false, fmt.Errorf("graph of %s/%s: %w", channel, arch, err)
	}
	return g, true, nil
}

// nextPatch returns the patch after the highest GA release with prefix in channel.
func (c *simClient) nextPatch(ctx context.Context, channel, arch, prefix string) (string, error) {
	g, ok, err := c.graph(ctx, channel, arch)
	if err != nil {
		return "", err
	}
	highest := -1
	for _, n := range g.Nodes {
		if rest, found := strings.CutPrefix(n.Version, prefix); found {
			if p, err := strconv.Atoi(rest); err == nil { // pre-releases (4.16.0-rc.1) do not parse
				highest = max(highest, p)
			}
		}
	}
	if !ok || highest < 0 {
		return "", fmt.Errorf("%s on %s serves no %s* release to follow: name the version to publish", channel, arch, prefix)
	}
	return prefix + strconv.Itoa(highest+1), nil
}

// publish adds a release through the simulator's admin endpoint.
func (c *simClient) publish(ctx context.Context, r cincinnatisim.PublishRequest) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/admin/publish", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusNoContent {
		msg, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if err != nil {
			msg = []byte(err.Error())
		}
		return fmt.Errorf("publish %s to %s/%s: %s %s", r.Version, r.Channel, r.Arch, resp.Status, msg)
	}
	return nil
}
