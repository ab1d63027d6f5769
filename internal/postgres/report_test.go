package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// outcomes records the service's status-write outcomes.
type outcomes struct{ got []string }

func (o *outcomes) StatusWritten(_, outcome string)           { o.got = append(o.got, outcome) }
func (o *outcomes) Aggregated(string, conditions.Phase, bool) {}
func (o *outcomes) last() string                              { return o.got[len(o.got)-1] }

// TestUnchangedReportWritesNothing checks the no-op suppression of status writes against PostgreSQL: a report
// identical to the stored one (observed_time aside, data spelled otherwise) leaves the row as it was (same xmin)
// and stages no event, and answers with the stored report; a changed report, or the same report once the stored
// one is older than the heartbeat, is written.
func TestUnchangedReportWritesNothing(t *testing.T) {
	const adapter = "a"
	set := kindsRequiring(t, map[string][]string{"versionstream": {adapter}})
	db := harness.OpenGorm(t, harness.NewDatabase(t))
	svc := resource.NewService(postgres.NewStore(db, set.All), set.All)
	seen := &outcomes{}
	svc.Observe(seen)
	svc.SuppressUnchangedReports(time.Hour)
	d := set.VersionStream
	ctx := resource.WithCaller(context.Background(), resource.Caller{Name: "test", Admin: true})
	r, err := svc.Create(ctx, d, "", resource.CreateInput{Name: "s", Spec: json.RawMessage(`{"target_version":"4.16"}`)})
	require.NoError(t, err)

	type rowState struct {
		Xmin   string
		Events int64
	}
	state := func() rowState {
		t.Helper()
		var s rowState
		require.NoError(t, db.Raw(`SELECT (SELECT xmin::text FROM adapter_statuses WHERE resource_id = ? AND adapter = ?) AS xmin,
			(SELECT count(*) FROM event_staging WHERE resource_id = ?) AS events`, r.ID, adapter, r.ID).Scan(&s).Error)
		return s
	}
	report := func(message, data string) conditions.Report {
		return conditions.Report{Adapter: adapter, ObservedGeneration: 1, ObservedTime: time.Now(), Data: json.RawMessage(data),
			Conditions: []conditions.Reported{{Type: conditions.Available, Status: conditions.True, Reason: "Ok", Message: message}}}
	}
	_, created, err := svc.PutStatus(ctx, d, "", r.ID, report("fine", `{"version":"4.16.3","n":[1,2]}`))
	require.NoError(t, err)
	require.True(t, created)
	before := state()

	tests := []struct {
		name        string
		report      conditions.Report
		heartbeat   time.Duration
		wantOutcome string
	}{
		{name: "identical, data spelled otherwise", report: report("fine", `{ "n": [1, 2], "version": "4.16.3" }`),
			heartbeat: time.Hour, wantOutcome: "unchanged"},
		{name: "another message is written", report: report("finer", `{"version":"4.16.3","n":[1,2]}`),
			heartbeat: time.Hour, wantOutcome: "updated"},
		{name: "identical again", report: report("finer", `{"version":"4.16.3","n":[1,2]}`),
			heartbeat: time.Hour, wantOutcome: "unchanged"},
		{name: "other data is written", report: report("finer", `{"version":"4.16.4","n":[1,2]}`),
			heartbeat: time.Hour, wantOutcome: "updated"},
		{name: "identical, but the stored one is older than the heartbeat", report: report("finer", `{"version":"4.16.4","n":[1,2]}`),
			heartbeat: time.Nanosecond, wantOutcome: "updated"},
		{name: "identical with suppression off", report: report("finer", `{"version":"4.16.4","n":[1,2]}`),
			heartbeat: 0, wantOutcome: "updated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc.SuppressUnchangedReports(tt.heartbeat)
			stored := state()
			got, created, err := svc.PutStatus(ctx, d, "", r.ID, tt.report)
			require.NoError(t, err)
			require.False(t, created)
			require.Equal(t, tt.wantOutcome, seen.last())
			after := state()
			if tt.wantOutcome == "unchanged" {
				require.Equal(t, stored, after, "the row and the staged events")
				all, err := svc.ListStatuses(ctx, d, "", r.ID)
				require.NoError(t, err)
				require.Len(t, all, 1)
				require.Equal(t, all[0], *got, "the answer is the stored report")
				return
			}
			require.NotEqual(t, stored.Xmin, after.Xmin, "the row is written")
			require.Equal(t, tt.report.Conditions[0].Message, got.Conditions[0].Message)
		})
	}
	require.NotEqual(t, before, state())
}
