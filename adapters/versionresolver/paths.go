package versionresolver

import (
	"slices"

	"github.com/Masterminds/semver/v3"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnati"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// graphSlice cuts from a channel's graph what the stream's clusters need: for every release older than the
// target, its newest unconditional hop not newer than the target and the newer conditional ones with their risks.
// Only releases the graph lists are hops, so a pulled release is never chosen. At most rollout.MaxPaths versions
// are described: those the fleet runs first, then the newest.
func graphSlice(g *cincinnati.Graph, target cincinnati.Release, allowPrerelease bool, fleet map[string]bool) *rollout.Graph {
	out := &rollout.Graph{Target: target.Version, Releases: map[string]string{target.Version: target.Image},
		Paths: map[string]rollout.Hops{}, Risks: map[string]rollout.Risk{}}
	top, err := semver.StrictNewVersion(target.Version)
	if err != nil || g == nil {
		return out
	}
	versions := make([]*semver.Version, len(g.Nodes))
	index := make(map[string]int, len(g.Nodes))
	for i, n := range g.Nodes {
		v, err := semver.StrictNewVersion(n.Version)
		if err != nil || v.GreaterThan(top) || (v.Prerelease() != "" && !allowPrerelease) {
			continue // not a release a stream of this target may run or move to
		}
		versions[i] = v
		index[n.Version] = i
	}
	best := map[int]int{} // from → newest unconditional to
	for _, e := range g.Edges {
		from, to := e[0], e[1]
		if from < 0 || to < 0 || from >= len(versions) || to >= len(versions) || versions[from] == nil || versions[to] == nil ||
			!versions[to].GreaterThan(versions[from]) {
			continue
		}
		if b, ok := best[from]; !ok || versions[to].GreaterThan(versions[b]) {
			best[from] = to
		}
	}
	conditional := map[int]map[int][]string{} // from → to → risk names
	for _, ce := range g.ConditionalEdges {
		names := make([]string, 0, len(ce.Risks))
		for _, r := range ce.Risks {
			names = append(names, r.Name)
			out.Risks[r.Name] = rollout.Risk{URL: r.URL, Message: r.Message}
		}
		for _, e := range ce.Edges {
			from, okFrom := index[e.From]
			to, okTo := index[e.To]
			if !okFrom || !okTo || !versions[to].GreaterThan(versions[from]) {
				continue
			}
			if conditional[from] == nil {
				conditional[from] = map[int][]string{}
			}
			conditional[from][to] = mergeNames(conditional[from][to], names)
		}
	}
	var froms []int
	for i, v := range versions {
		if v != nil && v.LessThan(top) {
			froms = append(froms, i)
		}
	}
	// The fleet's versions first, then the newest: a truncated slice still describes every cluster it can.
	slices.SortFunc(froms, func(a, b int) int {
		fa, fb := fleet[g.Nodes[a].Version], fleet[g.Nodes[b].Version]
		if fa != fb {
			if fa {
				return -1
			}
			return 1
		}
		return versions[b].Compare(versions[a])
	})
	if len(froms) > rollout.MaxPaths {
		froms, out.Truncated = froms[:rollout.MaxPaths], true
	}
	for _, from := range froms {
		var hops rollout.Hops
		b, hasBest := best[from]
		if hasBest {
			hops.To = g.Nodes[b].Version
			out.Releases[hops.To] = g.Nodes[b].Payload
		}
		var tos []int
		for to := range conditional[from] {
			if !hasBest || versions[to].GreaterThan(versions[b]) {
				tos = append(tos, to)
			}
		}
		slices.SortFunc(tos, func(a, b int) int { return versions[b].Compare(versions[a]) })
		for _, to := range tos {
			hops.Conditional = append(hops.Conditional, rollout.ConditionalHop{To: g.Nodes[to].Version, Risks: conditional[from][to]})
			out.Releases[g.Nodes[to].Version] = g.Nodes[to].Payload
		}
		out.Paths[g.Nodes[from].Version] = hops
	}
	keepNamedRisks(out)
	return out
}

// keepNamedRisks drops the risks no described hop names, so that the slice stays bounded by its paths.
func keepNamedRisks(g *rollout.Graph) {
	named := map[string]bool{}
	for _, h := range g.Paths {
		for _, c := range h.Conditional {
			for _, r := range c.Risks {
				named[r] = true
			}
		}
	}
	for name := range g.Risks {
		if !named[name] {
			delete(g.Risks, name)
		}
	}
	if len(g.Risks) == 0 {
		g.Risks = nil
	}
}

func mergeNames(have, add []string) []string {
	for _, n := range add {
		if !slices.Contains(have, n) {
			have = append(have, n)
		}
	}
	slices.Sort(have)
	return have
}
