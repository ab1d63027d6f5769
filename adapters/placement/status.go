package placement

import (
	"fmt"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// ConditionPlaced says whether the cluster has a management cluster: True once placed (and for good), False with
// ReasonNoCapacity while none fits, False with ReasonReleased once its slot is freed at deletion.
const ConditionPlaced = "Placed"

// Reasons of ConditionPlaced and of Available.
const (
	ReasonPlaced     = "Placed"
	ReasonNoCapacity = "NoCapacity"
	// ReasonWaitingForHostedClusterRemoval: the cluster is being deleted and the applier has not yet finalized it,
	// so its HostedCluster may still take its slot.
	ReasonWaitingForHostedClusterRemoval = "WaitingForHostedClusterRemoval"
	// ReasonReleased: the deleted cluster's slot is free again.
	ReasonReleased = "Released"
	// ReasonNeverPlaced: the deleted cluster had no slot to free.
	ReasonNeverPlaced = "NeverPlaced"
	// ReasonInvalidSpec: the cluster's spec.placement cannot be read (API and placer disagree on the schema).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonLedgerUnavailable: the placements could not be read back from the API before the first decision.
	ReasonLedgerUnavailable = "LedgerUnavailable"
	// ReasonManagementClustersUnavailable: the management clusters could not be listed.
	ReasonManagementClustersUnavailable = "ManagementClustersUnavailable"
	// ReasonApplierReportUnavailable: the applier's report on a deleting cluster could not be read.
	ReasonApplierReportUnavailable = "ApplierReportUnavailable"
)

// Keys of the report's data: the placement, which the applier obeys and the API counts (a management cluster a
// report names cannot be deleted; api.Kinds().Cluster.ReportedReferences).
const (
	DataManagementCluster = "management_cluster"
	DataRegion            = "region"
)

// Placement is where a cluster is placed.
type Placement struct {
	ManagementCluster string
	// Region is the management cluster's region when it was chosen; empty when it names none.
	Region string
}

func (p Placement) data() map[string]any {
	return map[string]any{DataManagementCluster: p.ManagementCluster, DataRegion: p.Region}
}

// placementOf reads the placement from a report of the placer's own; ok is false when it names none, or when it
// is a finalized report (its slot was freed).
func placementOf(r *adapter.Report) (Placement, bool) {
	if r == nil {
		return Placement{}, false
	}
	if c := r.Condition(conditions.Finalized); c != nil && c.Status == conditions.True {
		return Placement{}, false
	}
	return dataPlacement(r)
}

// dataPlacement reads the placement a report's data names, whatever the report says of it.
func dataPlacement(r *adapter.Report) (Placement, bool) {
	p := Placement{ManagementCluster: r.DataString(DataManagementCluster), Region: r.DataString(DataRegion)}
	return p, p.ManagementCluster != ""
}

// placed is the report of a placed cluster. Available's message is the management cluster's name alone: the
// CLI's MANAGEMENT CLUSTER column shows it.
func placed(p Placement) adapter.Outcome {
	where := p.ManagementCluster
	if p.Region != "" {
		where += " in " + p.Region
	}
	return adapter.Outcome{
		Available:  conditions.Reported{Status: conditions.True, Reason: ReasonPlaced, Message: p.ManagementCluster},
		Conditions: []conditions.Reported{{Type: ConditionPlaced, Status: conditions.True, Reason: ReasonPlaced, Message: "placed on " + where}},
		Data:       p.data(),
	}
}

// noCapacity is the report of a cluster no management cluster takes, with each one's reason; it asks to be looked
// at again after retry, so that the cluster is placed soon after capacity appears.
func noCapacity(reasons []string, retry time.Duration) adapter.Outcome {
	msg := "no management cluster is registered"
	if len(reasons) > 0 {
		msg = "no management cluster fits: " + strings.Join(reasons, "; ")
	}
	return adapter.Outcome{
		Available:    conditions.Reported{Status: conditions.False, Reason: ReasonNoCapacity, Message: msg},
		Conditions:   []conditions.Reported{{Type: ConditionPlaced, Status: conditions.False, Reason: ReasonNoCapacity, Message: msg}},
		RequeueAfter: retry,
	}
}

// failed is the report of a reconcile that could not tell the placement (reason says what could not be read);
// the error returned with it makes the runtime retry with backoff.
func failed(reason string, err error) (adapter.Outcome, error) {
	msg := err.Error()
	return adapter.Outcome{
		Available:  conditions.Reported{Status: conditions.False, Reason: reason, Message: msg},
		Conditions: []conditions.Reported{{Type: ConditionPlaced, Status: conditions.Unknown, Reason: reason, Message: msg}},
	}, adapter.Transient(reason, err)
}

// waiting is the report of a deleting cluster whose HostedCluster the applier has not finalized yet: the slot is
// kept, and the placement stays in the data so that the applier still knows where to remove it from.
func waiting(p Placement, applier string, retry time.Duration) adapter.Outcome {
	msg := fmt.Sprintf("keeping the slot on %s until %s has removed the HostedCluster", p.ManagementCluster, applier)
	return adapter.Outcome{
		Available:    conditions.Reported{Status: conditions.False, Reason: ReasonWaitingForHostedClusterRemoval, Message: msg},
		Conditions:   []conditions.Reported{{Type: ConditionPlaced, Status: conditions.True, Reason: ReasonWaitingForHostedClusterRemoval, Message: msg}},
		Data:         p.data(),
		RequeueAfter: retry,
	}
}

// released is the final report of a deleted cluster whose slot is free. The placement stays in the data for the
// record; being Finalized, the report is not read back into the ledger.
func released(p Placement) adapter.Outcome {
	msg := "the slot on " + p.ManagementCluster + " is free"
	return adapter.Outcome{
		Available:  conditions.Reported{Status: conditions.False, Reason: ReasonReleased, Message: msg},
		Conditions: []conditions.Reported{{Type: ConditionPlaced, Status: conditions.False, Reason: ReasonReleased, Message: msg}},
		Data:       p.data(),
		Finalized:  true,
	}
}

// neverPlaced is the final report of a deleted cluster that had no slot.
func neverPlaced() adapter.Outcome {
	msg := "deleted before it was placed"
	return adapter.Outcome{
		Available:  conditions.Reported{Status: conditions.False, Reason: ReasonNeverPlaced, Message: msg},
		Conditions: []conditions.Reported{{Type: ConditionPlaced, Status: conditions.False, Reason: ReasonNeverPlaced, Message: msg}},
		Finalized:  true,
	}
}
