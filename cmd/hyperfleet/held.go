package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// applierAdapter is the adapter whose report on a cluster says which version it runs and why an upgrade waits.
const applierAdapter = "hostedcluster-applier"

// Keys of the applier's report data that the clusters' table reads.
const (
	dataCurrentVersion = "current_version"
	dataTargetVersion  = "target_version"
	dataHeldReason     = "held_reason"
	// dataUpgradeState is "Partial" while the HostedCluster moves to dataUpgradeVersion.
	dataUpgradeState   = "upgrade_state"
	dataUpgradeVersion = "upgrade_version"
	upgradePartial     = "Partial"
)

// outsideUpgradeWindow is the applier's own hold reason (its UpgradePending condition) beside pkg/rollout's.
const outsideUpgradeWindow = "OutsideUpgradeWindow"

// reportColumn is a table column computed from adapters' reports rather than read by a JSONPath: what a cell
// shows takes more than a path can say (HELD maps a reason to a word and puts the cluster's own pause first).
type reportColumn struct {
	header string
	wide   bool
	cell   func(o *object) string
}

// reportColumns are the report columns of kind k's table and the adapters whose reports they read, asked for with
// the list (statuses=, one request per page). Only clusters have them: their version and why they wait is what
// someone following a rollout looks for in `get clusters`.
func reportColumns(kinds *api.KindTable, k *api.Kind) ([]reportColumn, []string) {
	if k != kinds.Cluster {
		return nil, nil
	}
	return []reportColumn{
		{header: "VERSION", cell: clusterVersion},
		{header: "TARGET", wide: true, cell: func(o *object) string { return orNone(o.reportData(applierAdapter, dataTargetVersion)) }},
		{header: "HELD", cell: clusterHeld},
	}, []string{applierAdapter}
}

// clusterVersion is the version a cluster runs, and while it upgrades the one it moves to: "4.16.3->4.16.5".
func clusterVersion(o *object) string {
	current := o.reportData(applierAdapter, dataCurrentVersion)
	if to := o.reportData(applierAdapter, dataUpgradeVersion); to != "" && to != current &&
		o.reportData(applierAdapter, dataUpgradeState) == upgradePartial {
		return orNone(current) + "->" + to
	}
	return orNone(current)
}

// clusterHeld is why a cluster does not move: "paused" for its own spec.paused, else its applier's hold reason as
// one word, "-" when nothing holds it.
func clusterHeld(o *object) string {
	var spec struct {
		Paused bool `json:"paused"`
	}
	if json.Unmarshal(specOf(o), &spec) == nil && spec.Paused {
		return "paused"
	}
	return heldWord(o.reportData(applierAdapter, dataHeldReason))
}

// heldWord is a hold reason (the applier's UpgradeBlocked and UpgradePending reasons) as a table shows it; an
// unknown reason shows as it is, so that a newer applier's reasons still say something.
func heldWord(reason string) string {
	switch reason {
	case "":
		return "-"
	case outsideUpgradeWindow:
		return "window"
	case rollout.HeldWaitingForStage:
		return "stage"
	case rollout.HeldWaitingForTurn:
		return "turn"
	case rollout.HeldRolloutPaused:
		return "rollout-paused"
	case rollout.HeldFailed:
		return "failed"
	case rollout.BlockedRiskNotAccepted:
		return "risk"
	case rollout.BlockedNoUpdatePath, rollout.BlockedPathUnknown:
		return "path"
	case rollout.BlockedNotInGraph:
		return "pulled"
	}
	return reason
}

// reportData is a string of the data of adapter's report embedded in o (statuses=); "" without one.
func (o *object) reportData(adapter, key string) string {
	if o.AdapterStatuses == nil {
		return ""
	}
	reports := *o.AdapterStatuses
	for i := range reports {
		if reports[i].Adapter == adapter {
			s, _ := reports[i].Data[key].(string)
			return s
		}
	}
	return ""
}

// withReports makes p ask for adapters' reports with each item.
func withReports(p api.ListParams, adapters []string) api.ListParams {
	if len(adapters) > 0 {
		p.Statuses = ptr(strings.Join(adapters, ","))
	}
	return p
}

// embedReports gives o the reports of adapters, as a list with statuses= would: a watch event's resource comes
// without them (the API does not embed reports in events), so each changed resource costs one request.
func (c *client) embedReports(ctx context.Context, k *api.Kind, o *object, adapters []string) error {
	if len(adapters) == 0 || o.AdapterStatuses != nil {
		return nil
	}
	answer, err := c.do(c.gen.ListResourceStatuses(ctx, k, o.ref()))
	if err != nil {
		return fmt.Errorf("the reports on %s %s: %w", k.Singular, o.name(), err)
	}
	var list api.AdapterStatusList
	if err := json.Unmarshal(answer, &list); err != nil {
		return fmt.Errorf("decode the reports on %s %s: %w", k.Singular, o.name(), err)
	}
	kept := []api.AdapterStatus{}
	for i := range list.Items {
		if slices.Contains(adapters, list.Items[i].Adapter) {
			kept = append(kept, list.Items[i])
		}
	}
	o.AdapterStatuses = &kept
	return nil
}
