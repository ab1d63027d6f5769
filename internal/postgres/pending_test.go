package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/aggregate"
	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// TestPendingColumnFollowsTheVocabulary checks that the stored, generated `pending` column of adapter_statuses (what
// pending_for reads) says "still has work" exactly when the Go rules say so: the report is behind the generation,
// or the resource is deleting and aggregate.Finalized does not hold for that adapter. The column is computed in SQL
// from a finalized generation that Go derives with the conditions vocabulary; if either side changes its notion of
// "finalized", this test fails.
func TestPendingColumnFollowsTheVocabulary(t *testing.T) {
	const adapter, other = "a", "b"
	finalized := func(s conditions.Status) []conditions.Reported {
		return []conditions.Reported{{Type: conditions.Available, Status: conditions.False}, {Type: conditions.Finalized, Status: s}}
	}
	available := []conditions.Reported{{Type: conditions.Available, Status: conditions.True}}
	tests := []struct {
		name         string
		reportFirst  []conditions.Reported // reported at generation 1, before anything else; nil: no report
		specChange   bool                  // a spec change takes the stream to generation 2
		deleteIt     bool                  // a delete takes it to the next generation
		reportAfter  []conditions.Reported // reported at the generation after the change or delete; nil: none
		wantPending  bool
		wantObserved int64
	}{
		{name: "reported at the current generation", reportFirst: available, wantPending: false, wantObserved: 1},
		{name: "behind after a spec change", reportFirst: available, specChange: true, wantPending: true, wantObserved: 1},
		{name: "caught up after a spec change", reportFirst: available, specChange: true, reportAfter: available, wantPending: false, wantObserved: 2},
		{name: "deleting, not yet reported on", reportFirst: available, deleteIt: true, wantPending: true, wantObserved: 1},
		{name: "deleting, Finalized=True at the deleting generation", reportFirst: available, deleteIt: true,
			reportAfter: finalized(conditions.True), wantPending: false, wantObserved: 2},
		{name: "deleting, Finalized=False", reportFirst: available, deleteIt: true, reportAfter: finalized(conditions.False),
			wantPending: true, wantObserved: 2},
		{name: "deleting, no Finalized condition", reportFirst: available, deleteIt: true, reportAfter: available,
			wantPending: true, wantObserved: 2},
		{name: "Finalized=True before the delete does not count", reportFirst: finalized(conditions.True), deleteIt: true,
			wantPending: true, wantObserved: 1},
	}
	// Two required adapters: the other never finalizes, so a resource the first one finalizes stays to be looked at.
	set := kindsRequiring(t, map[string][]string{"versionstream": {adapter, other}})
	db := harness.OpenGorm(t, harness.NewDatabase(t))
	svc := resource.NewService(postgres.NewStore(db, set.All), set.All)
	d := set.VersionStream
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := resource.WithCaller(context.Background(), resource.Caller{Name: "test", Admin: true})
			r, err := svc.Create(ctx, d, "", resource.CreateInput{Name: "s" + string(rune('a'+i)), Spec: json.RawMessage(`{"target_version":"4.16"}`)})
			require.NoError(t, err)
			report := func(generation int64, conds []conditions.Reported) {
				t.Helper()
				_, _, err := svc.PutStatus(ctx, d, "", r.ID, conditions.Report{Adapter: adapter, ObservedGeneration: generation,
					ObservedTime: time.Now(), Conditions: conds})
				require.NoError(t, err)
			}
			if tt.reportFirst != nil {
				report(1, tt.reportFirst)
			}
			if tt.specChange {
				_, err := svc.Update(ctx, d, "", r.ID, resource.Patch{Spec: json.RawMessage(`{"target_version":"4.17"}`)}, nil)
				require.NoError(t, err)
			}
			if tt.deleteIt {
				_, err := svc.Delete(ctx, d, "", r.ID)
				require.NoError(t, err)
			}
			now, err := svc.Get(ctx, d, "", r.ID)
			require.NoError(t, err)
			if tt.reportAfter != nil {
				report(now.Generation, tt.reportAfter)
			}

			var row struct {
				Pending            bool
				ObservedGeneration int64
			}
			require.NoError(t, db.Raw(`SELECT pending, observed_generation FROM adapter_statuses WHERE resource_id = ? AND adapter = ?`,
				r.ID, adapter).Scan(&row).Error)
			stored, err := svc.ListStatuses(ctx, d, "", r.ID)
			require.NoError(t, err)
			var mine aggregate.Report
			for _, st := range stored {
				if st.Adapter == adapter {
					mine = aggregate.Report{Adapter: adapter, ObservedGeneration: st.ObservedGeneration, ObservedTime: st.ObservedTime, Conditions: st.Conditions}
				}
			}
			goRule := mine.ObservedGeneration < now.Generation || (now.Deleting() &&
				!aggregate.Finalized(aggregate.Input{Generation: now.Generation, Deleting: true, Required: []string{adapter}, Reports: []aggregate.Report{mine}}))

			require.Equal(t, tt.wantObserved, row.ObservedGeneration)
			require.Equal(t, tt.wantPending, row.Pending, "the pending column")
			require.Equal(t, goRule, row.Pending, "the pending column against the Go rule")
		})
	}
}
