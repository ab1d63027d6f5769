package placement

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hyperfleet/hyperfleet/pkg/capacity"
)

// Candidate is one management cluster as a decision sees it: its spec, whether the applier reaches it, and how
// many clusters the ledger has placed on it.
type Candidate struct {
	Name   string
	Region string
	Labels map[string]string
	// Deleting is true once the ManagementCluster is being deleted.
	Deleting bool
	// Cordoned is true when its spec.schedulable is false.
	Cordoned bool
	// Reachable is true when the applier's latest report on it is Available=True; Unreachable says why not (the
	// applier's reason, or that it has not reported).
	Reachable   bool
	Unreachable string
	// Invalid says why its spec could not be read; such a management cluster is never chosen.
	Invalid  string
	Capacity Capacity
	// Placed is how many clusters the ledger has on it.
	Placed int
}

// Capacity is a management cluster's budgets; a zero VCPU or MemoryGiB is no budget of that kind.
type Capacity = capacity.Budget

// ControlPlane is what one hosted control plane counts against a management cluster's budgets.
type ControlPlane = capacity.ControlPlane

// Want is what a cluster asks of the management cluster it is placed on.
type Want struct {
	// Region, when not empty, is the only region the cluster may be placed in.
	Region string
	// Selector are labels the management cluster must all carry.
	Selector map[string]string
	// ControlPlane is what the cluster's control plane counts.
	ControlPlane ControlPlane
}

// Choose picks the management cluster for a cluster: among the candidates that are not being deleted, not
// cordoned, reachable, in the wanted region, carrying the selector's labels and with room in every budget for one
// more control plane, the least used by share of its fullest budget, ties broken by name. It returns "" when none
// fits. reasons say, one per candidate refused, in name order, why it was refused ("mc-a: full (2/2 hosted
// clusters)"), so that a cluster left unplaced can tell its owner what to change.
func Choose(candidates []Candidate, want Want) (name string, reasons []string) {
	sorted := slices.Clone(candidates)
	slices.SortFunc(sorted, func(a, b Candidate) int { return cmp.Compare(a.Name, b.Name) })
	best, bestShare := -1, 0.0
	for i := range sorted {
		c := &sorted[i]
		if why := refusal(c, want); why != "" {
			reasons = append(reasons, c.Name+": "+why)
			continue
		}
		// Strictly less: of equal shares the first in name order wins.
		if s := c.Capacity.Used(c.Placed, want.ControlPlane); best < 0 || s < bestShare {
			best, bestShare = i, s
		}
	}
	if best < 0 {
		return "", reasons
	}
	return sorted[best].Name, reasons
}

// refusal says why c cannot take the cluster, or "" when it can. What the cluster asks for is checked before
// what may pass (reachability, room), so that the reason names what the cluster's owner or an operator must change.
func refusal(c *Candidate, want Want) string {
	switch {
	case c.Deleting:
		return "being deleted"
	case c.Invalid != "":
		return "unreadable spec (" + c.Invalid + ")"
	case c.Cordoned:
		return "cordoned"
	case want.Region != "" && c.Region != want.Region:
		if c.Region == "" {
			return fmt.Sprintf("in no region, not %s", want.Region)
		}
		return fmt.Sprintf("in region %s, not %s", c.Region, want.Region)
	case !matches(c.Labels, want.Selector):
		return "labels do not match"
	case !c.Reachable:
		return fmt.Sprintf("not reachable (%s)", cmp.Or(c.Unreachable, "unknown"))
	}
	return c.Capacity.Full(c.Placed, want.ControlPlane)
}

// matches reports whether labels carry every key of selector with its value.
func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
