package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// pendingFixture is a database with version streams that two adapters (a, b) must report on, and the service
// over it.
type pendingFixture struct {
	db  *gorm.DB
	svc *resource.Service
	d   *resource.Descriptor
	set []*resource.Descriptor
	ctx context.Context
}

func newPendingFixture(tb testing.TB) *pendingFixture {
	tb.Helper()
	set := kindsRequiring(tb, map[string][]string{"versionstream": {"a", "b"}})
	db := harness.OpenGorm(tb, harness.NewDatabase(tb))
	return &pendingFixture{db: db, svc: resource.NewService(postgres.NewStore(db, set.All), set.All), d: set.VersionStream,
		set: set.All, ctx: resource.WithCaller(context.Background(), resource.Caller{Name: "test", Admin: true})}
}

func (f *pendingFixture) create(tb testing.TB, name string) *resource.Resource {
	tb.Helper()
	r, err := f.svc.Create(f.ctx, f.d, "", resource.CreateInput{Name: name, Spec: json.RawMessage(`{"target_version":"4.16"}`)})
	require.NoError(tb, err)
	return r
}

func (f *pendingFixture) report(tb testing.TB, id, adapter string, conds ...conditions.Reported) {
	tb.Helper()
	r, err := f.svc.Get(f.ctx, f.d, "", id)
	require.NoError(tb, err)
	if conds == nil {
		conds = []conditions.Reported{{Type: conditions.Available, Status: conditions.True}}
	}
	_, _, err = f.svc.PutStatus(f.ctx, f.d, "", id, conditions.Report{Adapter: adapter, ObservedGeneration: r.Generation,
		ObservedTime: time.Now(), Conditions: conds})
	require.NoError(tb, err)
}

func (f *pendingFixture) changeSpec(tb testing.TB, id string) {
	tb.Helper()
	_, err := f.svc.Update(f.ctx, f.d, "", id, resource.Patch{Spec: json.RawMessage(`{"target_version":"4.17"}`)}, nil)
	require.NoError(tb, err)
}

// age moves every time recorded about a resource (its row, its reports, its history) back by by, as if all of it
// had happened that long ago: the database's clock is the one the collector measures ages with.
func (f *pendingFixture) age(tb testing.TB, id string, by time.Duration) {
	tb.Helper()
	shift := fmt.Sprintf("%d seconds", int(by.Seconds()))
	for _, stmt := range []string{
		`UPDATE ` + f.d.Table + ` SET created_time = created_time - CAST(@shift AS interval), updated_time = updated_time - CAST(@shift AS interval),
			deleted_time = deleted_time - CAST(@shift AS interval) WHERE id = @id`,
		`UPDATE adapter_statuses SET created_time = created_time - CAST(@shift AS interval), last_report_time = last_report_time - CAST(@shift AS interval),
			observed_time = observed_time - CAST(@shift AS interval) WHERE resource_id = @id`,
		`UPDATE resource_history SET time = time - CAST(@shift AS interval) WHERE resource_id = @id`,
	} {
		require.NoError(tb, f.db.Exec(stmt, sql.Named("shift", shift), sql.Named("id", id)).Error)
	}
}

// scrape gathers a collector as /metrics would.
func scrape(tb testing.TB, c prometheus.Collector) []*dto.MetricFamily {
	tb.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(tb, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(tb, err)
	return mfs
}

// value returns the value of the series of name with exactly labels, and whether there is one.
func value(mfs []*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestStuckPendingMetricsCountByOperationAndAge leaves version streams pending for their required adapters in each
// way (never reported, behind a spec change, deleting and not finalized), at known ages, and checks what a scrape
// says for each adapter and operation.
func TestStuckPendingMetricsCountByOperationAndAge(t *testing.T) {
	f := newPendingFixture(t)
	finalized := []conditions.Reported{{Type: conditions.Available, Status: conditions.False}, {Type: conditions.Finalized, Status: conditions.True}}

	// Never reported: one 10 minutes old, one new.
	old := f.create(t, "never-reported-old")
	f.age(t, old.ID, 10*time.Minute)
	f.create(t, "never-reported-new")

	// Reported by both, then changed 20 minutes ago; a third adapter, not required, is behind too and not counted.
	behind := f.create(t, "behind")
	f.report(t, behind.ID, "a")
	f.report(t, behind.ID, "b")
	f.report(t, behind.ID, "c")
	f.changeSpec(t, behind.ID)
	f.age(t, behind.ID, 20*time.Minute)

	// Behind for 6 minutes, with the history entry of its change gone (retention): its last write dates it.
	pruned := f.create(t, "behind-pruned")
	f.report(t, pruned.ID, "a")
	f.report(t, pruned.ID, "b")
	f.changeSpec(t, pruned.ID)
	f.age(t, pruned.ID, 6*time.Minute)
	require.NoError(t, f.db.Exec(`DELETE FROM resource_history WHERE resource_id = ? AND generation > 1`, pruned.ID).Error)

	// Deleted two hours ago: a finalized it, b did not.
	deleting := f.create(t, "deleting")
	f.report(t, deleting.ID, "a")
	f.report(t, deleting.ID, "b")
	_, err := f.svc.Delete(f.ctx, f.d, "", deleting.ID)
	require.NoError(t, err)
	f.report(t, deleting.ID, "a", finalized...)
	f.age(t, deleting.ID, 2*time.Hour)

	// Settled: pending for no one.
	settled := f.create(t, "settled")
	f.report(t, settled.ID, "a")
	f.report(t, settled.ID, "b")
	f.age(t, settled.ID, 3*time.Hour)

	c, err := postgres.NewPendingCollector(postgres.NewStore(f.db, f.set), f.set, postgres.PendingConfig{Every: time.Nanosecond})
	require.NoError(t, err)
	mfs := scrape(t, c)

	type want struct {
		n      float64
		longer [4]float64 // 1m, 5m, 15m, 1h
		oldest float64    // at least this many seconds, and less than a minute more
	}
	tests := []struct {
		adapter, operation string
		want               want
	}{
		{"a", postgres.PendingCreate, want{n: 2, longer: [4]float64{1, 1, 0, 0}, oldest: 600}},
		{"b", postgres.PendingCreate, want{n: 2, longer: [4]float64{1, 1, 0, 0}, oldest: 600}},
		{"a", postgres.PendingUpdate, want{n: 2, longer: [4]float64{2, 2, 1, 0}, oldest: 1200}},
		{"b", postgres.PendingUpdate, want{n: 2, longer: [4]float64{2, 2, 1, 0}, oldest: 1200}},
		{"a", postgres.PendingDelete, want{}},
		{"b", postgres.PendingDelete, want{n: 1, longer: [4]float64{1, 1, 1, 1}, oldest: 7200}},
	}
	for _, tt := range tests {
		t.Run(tt.adapter+"/"+tt.operation, func(t *testing.T) {
			labels := map[string]string{"kind": f.d.Kind, "adapter": tt.adapter, "operation": tt.operation}
			n, ok := value(mfs, "hyperfleet_pending_resources", labels)
			require.True(t, ok, "hyperfleet_pending_resources%v is exported", labels)
			require.Equal(t, tt.want.n, n, "pending")
			for i, threshold := range []string{"1m", "5m", "15m", "1h"} {
				with := map[string]string{"threshold": threshold}
				for k, v := range labels {
					with[k] = v
				}
				got, ok := value(mfs, "hyperfleet_pending_resources_longer_than", with)
				require.True(t, ok, "hyperfleet_pending_resources_longer_than%v is exported", with)
				require.Equal(t, tt.want.longer[i], got, "pending longer than %s", threshold)
			}
			oldest, ok := value(mfs, "hyperfleet_pending_oldest_age_seconds", labels)
			require.True(t, ok)
			require.GreaterOrEqual(t, oldest, tt.want.oldest, "oldest age")
			require.Less(t, oldest, tt.want.oldest+60, "oldest age")
		})
	}

	t.Run("an adapter that is not required has no series", func(t *testing.T) {
		_, ok := value(mfs, "hyperfleet_pending_resources", map[string]string{"kind": f.d.Kind, "adapter": "c", "operation": postgres.PendingUpdate})
		require.False(t, ok)
	})
	t.Run("a kind without required adapters has no series", func(t *testing.T) {
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "kind" {
						require.Equal(t, f.d.Kind, l.GetValue(), "%s", mf.GetName())
					}
				}
			}
		}
	})
	t.Run("counted now, without errors", func(t *testing.T) {
		at, ok := value(mfs, "hyperfleet_pending_counted_timestamp_seconds", nil)
		require.True(t, ok)
		require.NotZero(t, at)
		errs, ok := value(mfs, "hyperfleet_pending_count_errors_total", nil)
		require.True(t, ok)
		require.Zero(t, errs)
	})
}

// TestStuckPendingMetricsAreCachedBetweenCounts checks that scrapes within the interval export the last count
// rather than run the statement again, and that a failed count keeps the last values and says so.
func TestStuckPendingMetricsAreCachedBetweenCounts(t *testing.T) {
	f := newPendingFixture(t)
	f.create(t, "first")
	c, err := postgres.NewPendingCollector(postgres.NewStore(f.db, f.set), f.set, postgres.PendingConfig{Every: time.Hour})
	require.NoError(t, err)
	labels := map[string]string{"kind": f.d.Kind, "adapter": "a", "operation": postgres.PendingCreate}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	gather := func() []*dto.MetricFamily {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		return mfs
	}
	n, _ := value(gather(), "hyperfleet_pending_resources", labels)
	require.Equal(t, 1.0, n)
	f.create(t, "second")
	n, _ = value(gather(), "hyperfleet_pending_resources", labels)
	require.Equal(t, 1.0, n, "the count of the last hour, not taken again")

	fresh, err := postgres.NewPendingCollector(postgres.NewStore(f.db, f.set), f.set, postgres.PendingConfig{Every: time.Nanosecond})
	require.NoError(t, err)
	n, _ = value(scrape(t, fresh), "hyperfleet_pending_resources", labels)
	require.Equal(t, 2.0, n, "a collector that counts on every scrape")
}

func TestStuckPendingThresholds(t *testing.T) {
	f := newPendingFixture(t)
	tests := []struct {
		name       string
		thresholds []time.Duration
		want       []string
		wantErr    string
	}{
		{name: "default", want: []string{"1m", "5m", "15m", "1h"}},
		{name: "sorted, duplicates dropped", thresholds: []time.Duration{2 * time.Hour, 90 * time.Second, 30 * time.Second, 90 * time.Second},
			want: []string{"30s", "90s", "2h"}},
		{name: "a fraction of a second", thresholds: []time.Duration{1500 * time.Millisecond}, wantErr: "whole number of seconds"},
		{name: "zero", thresholds: []time.Duration{0}, wantErr: "at least 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := postgres.NewPendingCollector(postgres.NewStore(f.db, f.set), f.set, postgres.PendingConfig{Thresholds: tt.thresholds})
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, mf := range scrape(t, c) {
				if mf.GetName() != "hyperfleet_pending_resources_longer_than" {
					continue
				}
				for _, m := range mf.GetMetric() {
					var adapter, op, threshold string
					for _, l := range m.GetLabel() {
						switch l.GetName() {
						case "adapter":
							adapter = l.GetValue()
						case "operation":
							op = l.GetValue()
						case "threshold":
							threshold = l.GetValue()
						}
					}
					if adapter == "a" && op == postgres.PendingCreate {
						got = append(got, threshold)
					}
				}
			}
			require.ElementsMatch(t, tt.want, got)
		})
	}
}
