// Package capacity is the arithmetic of a management cluster's room: what one hosted control plane takes of its
// budgets, how used it is by its fullest budget, and which budget has no room left. The placer places by it and the
// applier reports it, so the two read a management cluster's fullness the same way.
package capacity

import (
	"fmt"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// What a highly available hosted control plane requests by default (HyperShift's sizing guide).
const (
	DefaultControlPlaneVCPU      = 5
	DefaultControlPlaneMemoryGiB = 18
)

// ControlPlane is what one hosted control plane counts against a management cluster's budgets.
type ControlPlane struct {
	VCPU, MemoryGiB int
}

// Budget is a management cluster's room; a zero VCPU or MemoryGiB is no budget of that kind.
type Budget struct {
	MaxHostedClusters int
	VCPU, MemoryGiB   int
}

// BudgetOf reads a ManagementCluster's spec.capacity.
func BudgetOf(c api.ManagementClusterCapacity) Budget {
	b := Budget{MaxHostedClusters: c.MaxHostedClusters}
	if c.Vcpu != nil {
		b.VCPU = *c.Vcpu
	}
	if c.MemoryGib != nil {
		b.MemoryGiB = *c.MemoryGib
	}
	return b
}

// Used is how used the budget is, by its fullest budget, with n control planes on it: 0 empty, 1 full, more when
// over. Each ratio is one correctly rounded division of integers, so equal shares (1/3 and 2/6) compare equal.
func (b Budget) Used(n int, cp ControlPlane) float64 {
	s := ratio(n, b.MaxHostedClusters)
	if b.VCPU > 0 {
		s = max(s, ratio(n*cp.VCPU, b.VCPU))
	}
	if b.MemoryGiB > 0 {
		s = max(s, ratio(n*cp.MemoryGiB, b.MemoryGiB))
	}
	return s
}

// Full says which budget has no room for one more control plane beside n, or "" when there is room
// ("full (2/2 hosted clusters)").
func (b Budget) Full(n int, cp ControlPlane) string {
	next := n + 1
	switch {
	case next > b.MaxHostedClusters:
		return fmt.Sprintf("full (%d/%d hosted clusters)", n, b.MaxHostedClusters)
	case b.VCPU > 0 && next*cp.VCPU > b.VCPU:
		return fmt.Sprintf("full (%d/%d vCPU)", n*cp.VCPU, b.VCPU)
	case b.MemoryGiB > 0 && next*cp.MemoryGiB > b.MemoryGiB:
		return fmt.Sprintf("full (%d/%d GiB memory)", n*cp.MemoryGiB, b.MemoryGiB)
	}
	return ""
}

// ratio is used/budget; a budget of nothing is full.
func ratio(used, budget int) float64 {
	if budget <= 0 {
		return 1
	}
	return float64(used) / float64(budget)
}
