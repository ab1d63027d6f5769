package versionresolver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// DefaultApplier is the adapter whose reports on clusters say what they run.
const DefaultApplier = "hostedcluster-applier"

// Keys and conditions of the applier's report on a cluster that a rollout pass reads: the contract between the
// two adapters, which never import each other (docs/adapters.md).
const (
	applierCurrentVersion = "current_version"
	applierAppliedImage   = "applied_release_image"
	applierUpgradeState   = "upgrade_state"
	applierUpgradeVersion = "upgrade_version"
	applierDegraded       = "Degraded"
	applierUpgradePending = "UpgradePending"
	applierOutsideWindow  = "OutsideUpgradeWindow"
	upgradeStatePartial   = "Partial"
)

// fleetPageSize is how many clusters one request of a pass lists, with the applier's report on each.
const fleetPageSize = 500

// apiFleet lists a stream's clusters through the API: a page of clusters with the applier's report embedded per
// request, so that a pass over 10,000 clusters costs 20 requests.
type apiFleet struct {
	api interface {
		List(ctx context.Context, kind *adapter.Kind, parentID string, q adapter.ListQuery) (*adapter.ListPage, error)
	}
	applier string
}

// Members returns every live cluster that names the stream.
func (f *apiFleet) Members(ctx context.Context, stream string) ([]Member, error) {
	var out []Member
	after := ""
	for {
		// A stream name is a DNS label: it needs no quoting in a search.
		page, err := f.api.List(ctx, adapter.Clusters(), "", adapter.ListQuery{Search: "spec.version_stream = '" + stream + "'",
			Size: fleetPageSize, After: after, Statuses: []string{f.applier}})
		if err != nil {
			return nil, fmt.Errorf("list the clusters of stream %s: %w", stream, err)
		}
		for i := range page.Items {
			if !page.Items[i].Deleting {
				out = append(out, memberOf(&page.Items[i], f.applier))
			}
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// memberOf reads what a pass needs of a listed cluster.
func memberOf(it *adapter.Listed, applier string) Member {
	var spec struct {
		Paused        bool     `json:"paused"`
		AcceptedRisks []string `json:"accepted_risks"`
	}
	if err := json.Unmarshal(it.Spec, &spec); err != nil {
		spec.Paused, spec.AcceptedRisks = false, nil // the API validated it; an undecodable one is neither paused nor accepting
	}
	m := Member{ID: it.ID, Name: it.Name, Labels: it.Labels, Paused: spec.Paused, AcceptedRisks: spec.AcceptedRisks}
	rep := it.Reports[applier]
	if rep == nil {
		return m
	}
	m.Version = rep.DataString(applierCurrentVersion)
	m.AppliedImage = rep.DataString(applierAppliedImage)
	m.Upgrading = rep.DataString(applierUpgradeState) == upgradeStatePartial
	m.UpgradeVersion = rep.DataString(applierUpgradeVersion)
	if c := rep.Condition(applierUpgradePending); c != nil && c.Status == conditions.True && c.Reason == applierOutsideWindow {
		m.WaitingWindow = true
	}
	if c := rep.Condition(applierDegraded); c != nil && c.Status == conditions.True {
		m.Degraded = true
	}
	available, _ := conditions.Find(it.Conditions, conditions.Available)
	m.Healthy = available.Status == conditions.True && !m.Degraded
	return m
}
