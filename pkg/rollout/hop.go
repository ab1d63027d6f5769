package rollout

import (
	"fmt"
	"slices"
	"strings"
)

// Why a cluster cannot move along the graph (the reasons of the applier's UpgradeBlocked condition).
const (
	// BlockedNoUpdatePath: the graph has no edge from the cluster's version towards the stream's target.
	BlockedNoUpdatePath = "NoUpdatePath"
	// BlockedRiskNotAccepted: the only way forward is a conditional edge with a risk nobody accepted.
	BlockedRiskNotAccepted = "RiskNotAccepted"
	// BlockedNotInGraph: the cluster's version is not in the channel's graph (pulled): no edge leaves it.
	BlockedNotInGraph = "ReleaseNotInGraph"
	// BlockedPathUnknown: the graph slice was truncated and leaves the cluster's version out.
	BlockedPathUnknown = "PathUnknown"
)

// Hop is where a cluster running some version may go next.
type Hop struct {
	// To is the release to move to, and Image its image; empty when the cluster stays (at the target, or blocked).
	To, Image string
	// Blocked says why the cluster cannot move, when it is not at the target.
	Blocked string
	// Risks are the risks not yet accepted of the newest release only a conditional edge reaches (with
	// BlockedRiskNotAccepted, or beside a To that an unconditional edge reaches).
	Risks []string
}

// NextHop returns the next hop of a cluster running current, given the risks accepted for it: the newest release
// one edge away that is not newer than the target, through a conditional edge only when every risk on it is
// accepted. A cluster at the target has nowhere to go (zero Hop).
func (g *Graph) NextHop(current string, accepted map[string]bool) Hop {
	if current == "" || current == g.Target {
		return Hop{}
	}
	hops, ok := g.Paths[current]
	if !ok {
		if g.Truncated {
			return Hop{Blocked: BlockedPathUnknown}
		}
		return Hop{Blocked: BlockedNotInGraph}
	}
	var waiting []string
	for _, c := range hops.Conditional {
		missing := unaccepted(c.Risks, accepted)
		if len(missing) == 0 {
			return Hop{To: c.To, Image: g.Releases[c.To]}
		}
		if waiting == nil {
			waiting = missing
		}
	}
	if hops.To != "" {
		return Hop{To: hops.To, Image: g.Releases[hops.To], Risks: waiting}
	}
	if waiting != nil {
		return Hop{Blocked: BlockedRiskNotAccepted, Risks: waiting}
	}
	return Hop{Blocked: BlockedNoUpdatePath}
}

func unaccepted(risks []string, accepted map[string]bool) []string {
	var out []string
	for _, r := range risks {
		if !accepted[r] {
			out = append(out, r)
		}
	}
	return out
}

// Explain describes a blocked hop for a condition message: for risks, each with its URL and message.
func (g *Graph) Explain(current string, h Hop) string {
	switch h.Blocked {
	case BlockedNoUpdatePath:
		return fmt.Sprintf("no update path from %s towards %s in the update graph: the cluster stays on %s", current, g.Target, current)
	case BlockedNotInGraph:
		return fmt.Sprintf("%s is no longer in the update graph (pulled): no update leaves it, the cluster stays on it", current)
	case BlockedPathUnknown:
		return fmt.Sprintf("the stream's graph slice does not describe %s (too many versions in the fleet)", current)
	case BlockedRiskNotAccepted:
		return fmt.Sprintf("the update from %s waits for accepted risks: %s; accept them by name in accepted_risks on the cluster or its stream",
			current, g.DescribeRisks(h.Risks))
	}
	return ""
}

// DescribeRisks lists risks with their URLs and messages.
func (g *Graph) DescribeRisks(names []string) string {
	parts := make([]string, 0, len(names))
	for _, name := range slices.Sorted(slices.Values(names)) {
		r := g.Risks[name]
		part := name
		if r.URL != "" {
			part += " (" + r.URL + ")"
		}
		if r.Message != "" {
			part += ": " + strings.TrimSpace(r.Message)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
