package cincinnatisim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
)

// Metadata keys Cincinnati sets on release nodes.
const (
	MetadataChannels    = "io.openshift.upgrades.graph.release.channels"
	MetadataManifestRef = "io.openshift.upgrades.graph.release.manifestref"
	MetadataURL         = "url"
)

// Sentinel errors. Errors returned by the simulator wrap one of these; check with errors.Is.
var (
	ErrInvalidVersion = errors.New("cincinnatisim: invalid version")
	ErrInvalidSeries  = errors.New("cincinnatisim: invalid series")
	ErrInvalidFixture = errors.New("cincinnatisim: invalid fixture")
	ErrInvalidFault   = errors.New("cincinnatisim: invalid fault")
	ErrInvalidRelease = errors.New("cincinnatisim: invalid release")
)

// Graph is a Cincinnati update graph as served by /api/upgrades_info/v1/graph.
type Graph struct {
	Version          int               `json:"version"`
	Nodes            []Node            `json:"nodes"`
	Edges            [][2]int          `json:"edges"`
	ConditionalEdges []ConditionalEdge `json:"conditionalEdges"`
}

// ConditionalEdge is an entry of Cincinnati's conditionalEdges. The shapes are the client's, which parses them and
// is checked against real graphs: one definition for both sides.
type ConditionalEdge = cincinnati.ConditionalEdge

// Edge is a conditional update, by version.
type Edge = cincinnati.Edge

// Risk is a known issue that gates a conditional edge.
type Risk = cincinnati.Risk

// Node is one release in a Graph.
type Node struct {
	Version  string            `json:"version"`
	Payload  string            `json:"payload"`
	Metadata map[string]string `json:"metadata"`
}

// clone returns a deep copy whose slices are never nil, so it marshals as [] rather than null.
func (g *Graph) clone() Graph {
	out := Graph{
		Version:          g.Version,
		Nodes:            make([]Node, len(g.Nodes)),
		Edges:            append(make([][2]int, 0, len(g.Edges)), g.Edges...),
		ConditionalEdges: make([]ConditionalEdge, len(g.ConditionalEdges)),
	}
	if out.Version == 0 {
		out.Version = 1
	}
	for i, n := range g.Nodes {
		md := make(map[string]string, len(n.Metadata))
		for k, v := range n.Metadata {
			md[k] = v
		}
		out.Nodes[i] = Node{Version: n.Version, Payload: n.Payload, Metadata: md}
	}
	for i, c := range g.ConditionalEdges {
		out.ConditionalEdges[i] = ConditionalEdge{Edges: slices.Clone(c.Edges), Risks: cloneRisks(c.Risks)}
	}
	return out
}

// validate checks that every edge points at an existing node.
func (g *Graph) validate() error {
	for _, e := range g.Edges {
		if e[0] < 0 || e[1] < 0 || e[0] >= len(g.Nodes) || e[1] >= len(g.Nodes) {
			return fmt.Errorf("edge %v out of range for %d nodes", e, len(g.Nodes))
		}
	}
	for i, n := range g.Nodes {
		if n.Version == "" {
			return fmt.Errorf("node %d has no version", i)
		}
	}
	for _, c := range g.ConditionalEdges {
		for _, e := range c.Edges {
			if g.index(e.From) < 0 || g.index(e.To) < 0 {
				return fmt.Errorf("conditional edge %s -> %s names a release the graph does not hold", e.From, e.To)
			}
		}
	}
	return nil
}

// PayloadFor returns the deterministic release image the simulator uses for version on arch when none is given:
// quay.io/openshift-release-dev/ocp-release@sha256:<sha256 of "version/arch">.
func PayloadFor(version, arch string) string {
	return "quay.io/openshift-release-dev/ocp-release@sha256:" + digest(version, arch)
}

func digest(version, arch string) string {
	sum := sha256.Sum256([]byte(version + "/" + arch))
	return hex.EncodeToString(sum[:])
}

// Series describes a generated set of releases. For every channel group G and minor M in Minors it produces the
// channel "G-M" on every arch, holding the GA patches M.0 … M.(Patches-1) and, as real Cincinnati does, the GA
// patches of the previous minor (M-1) when that minor is also in Minors. The eus group only exists for even minors.
// When Prereleases is set, candidate channels also hold M.0-ec.0 … ec.2 and M.0-rc.0 … rc.2; other groups only ever
// hold GA releases. Edges go from every release to every later release of the same minor, and from the highest GA
// patch of M-1 to every release of M.
type Series struct {
	// ChannelGroups defaults to stable, fast, candidate, eus.
	ChannelGroups []string
	// Minors are "MAJOR.MINOR" strings such as "4.16".
	Minors []string
	// Patches is the number of GA patches per minor; at least 1.
	Patches int
	// Arches defaults to amd64.
	Arches []string
	// Prereleases adds ec and rc releases to candidate channels.
	Prereleases bool
}

type minorVersion struct{ major, minor int }

func (m minorVersion) String() string { return fmt.Sprintf("%d.%d", m.major, m.minor) }

// graphs builds the series' graphs keyed by channel and arch. It returns an error wrapping ErrInvalidSeries if the
// series is malformed.
func (s Series) graphs() (map[graphKey]*Graph, error) {
	groups := s.ChannelGroups
	if len(groups) == 0 {
		groups = []string{"stable", "fast", "candidate", "eus"}
	}
	arches := s.Arches
	if len(arches) == 0 {
		arches = []string{"amd64"}
	}
	if s.Patches < 1 {
		return nil, fmt.Errorf("%w: patches must be at least 1, got %d", ErrInvalidSeries, s.Patches)
	}
	if len(s.Minors) == 0 {
		return nil, fmt.Errorf("%w: no minors", ErrInvalidSeries)
	}
	minors := map[minorVersion]bool{}
	var ordered []minorVersion
	for _, m := range s.Minors {
		majorText, minorText, ok := strings.Cut(strings.TrimSpace(m), ".")
		a, err1 := strconv.Atoi(majorText)
		b, err2 := strconv.Atoi(minorText)
		if !ok || err1 != nil || err2 != nil || a < 0 || b < 0 {
			return nil, fmt.Errorf("%w: minor %q is not MAJOR.MINOR", ErrInvalidSeries, m)
		}
		mv := minorVersion{a, b}
		if !minors[mv] {
			minors[mv] = true
			ordered = append(ordered, mv)
		}
	}
	for _, g := range groups {
		if g == "" || strings.ContainsAny(g, "-_") {
			return nil, fmt.Errorf("%w: channel group %q", ErrInvalidSeries, g)
		}
	}
	for _, a := range arches {
		if a == "" || strings.Contains(a, "_") {
			return nil, fmt.Errorf("%w: arch %q", ErrInvalidSeries, a)
		}
	}

	// The pre-releases generated per minor, in ascending order.
	prereleaseSuffixes := []string{"ec.0", "ec.1", "ec.2", "rc.0", "rc.1", "rc.2"}
	out := map[graphKey]*Graph{}
	// channels[arch][version] lists the channels a release is in, for its metadata.
	channels := map[string]map[string][]string{}
	for _, arch := range arches {
		channels[arch] = map[string][]string{}
		for _, group := range groups {
			for _, m := range ordered {
				if group == "eus" && m.minor%2 != 0 {
					continue
				}
				var versions []string
				if prev := (minorVersion{m.major, m.minor - 1}); m.minor > 0 && minors[prev] {
					versions = append(versions, gaVersions(prev, s.Patches)...)
				}
				if group == "candidate" && s.Prereleases {
					for _, p := range prereleaseSuffixes {
						versions = append(versions, fmt.Sprintf("%s.0-%s", m, p))
					}
				}
				versions = append(versions, gaVersions(m, s.Patches)...)
				channel := group + "-" + m.String()
				g := &Graph{Version: 1, ConditionalEdges: []ConditionalEdge{}}
				for _, v := range versions {
					channels[arch][v] = append(channels[arch][v], channel)
					g.Nodes = append(g.Nodes, Node{Version: v, Payload: PayloadFor(v, arch)})
				}
				edges, err := seriesEdges(versions)
				if err != nil {
					return nil, err
				}
				g.Edges = edges
				out[graphKey{channel, arch}] = g
			}
		}
	}
	for key, g := range out {
		for i := range g.Nodes {
			n := &g.Nodes[i]
			chs := slices.Clone(channels[key.arch][n.Version])
			slices.Sort(chs)
			n.Metadata = map[string]string{
				MetadataChannels:    strings.Join(chs, ","),
				MetadataManifestRef: "sha256:" + digest(n.Version, key.arch),
			}
			if !strings.Contains(n.Version, "-") {
				n.Metadata[MetadataURL] = "https://access.redhat.com/errata/RHBA-2024:" + digest(n.Version, "errata")[:4]
			}
		}
	}
	return out, nil
}

func gaVersions(m minorVersion, patches int) []string {
	out := make([]string, patches)
	for p := range patches {
		out[p] = fmt.Sprintf("%s.%d", m, p)
	}
	return out
}

// seriesEdges links every version to every later version of its minor, and the highest GA version of a minor to
// every version of the next minor. versions must parse.
func seriesEdges(versions []string) ([][2]int, error) {
	parsed := make([]semver, len(versions))
	for i, v := range versions {
		var err error
		if parsed[i], err = parseVersion(v); err != nil {
			return nil, fmt.Errorf("%w: generated version %q: %w", ErrInvalidSeries, v, err)
		}
	}
	edges := [][2]int{}
	for i := range parsed {
		for j := range parsed {
			if upgradeEdge(parsed, i, j) {
				edges = append(edges, [2]int{i, j})
			}
		}
	}
	return edges, nil
}

// upgradeEdge reports whether the simulator's edge rule links nodes[from] to nodes[to]: same minor and newer, or
// from the highest GA release of the previous minor.
func upgradeEdge(nodes []semver, from, to int) bool {
	a, b := nodes[from], nodes[to]
	if a.sameMinor(b) {
		return a.compare(b) < 0
	}
	if !a.followsMinor(b) || a.prerelease() {
		return false
	}
	for _, n := range nodes {
		if n.sameMinor(a) && !n.prerelease() && n.compare(a) > 0 {
			return false
		}
	}
	return true
}

// loadFixtures reads every <channel>_<arch>.json file in dir. Other files and subdirectories are ignored.
func loadFixtures(dir string) (map[graphKey]*Graph, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFixture, err)
	}
	out := map[graphKey]*Graph{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			continue
		}
		base := strings.TrimSuffix(name, ".json")
		i := strings.LastIndex(base, "_")
		if i <= 0 || i == len(base)-1 {
			return nil, fmt.Errorf("%w: %s is not named <channel>_<arch>.json", ErrInvalidFixture, name)
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidFixture, err)
		}
		var g Graph
		if err := json.Unmarshal(data, &g); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidFixture, name, err)
		}
		if err := g.validate(); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidFixture, name, err)
		}
		c := g.clone()
		out[graphKey{channel: base[:i], arch: base[i+1:]}] = &c
	}
	return out, nil
}
