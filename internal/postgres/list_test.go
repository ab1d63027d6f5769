package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// listFixture is a store over a database holding listRows version streams, analyzed.
type listFixture struct {
	store *postgres.Store
	d     *resource.Descriptor
	ctx   context.Context
}

const listRows = 1505

func newListFixture(tb testing.TB) *listFixture { return newListFixtureOf(tb, listRows) }

func newListFixtureOf(tb testing.TB, rows int) *listFixture {
	tb.Helper()
	set := kindsRequiring(tb, nil)
	db := harness.OpenGorm(tb, harness.NewDatabase(tb))
	f := &listFixture{store: postgres.NewStore(db, set.All), d: set.VersionStream,
		ctx: resource.WithCaller(context.Background(), resource.Caller{Name: "test", Admin: true})}
	svc := resource.NewService(f.store, set.All)
	_, err := svc.Create(f.ctx, f.d, "", resource.CreateInput{Name: "bulk-0", Spec: json.RawMessage(`{"target_version":"4.16"}`)})
	require.NoError(tb, err)
	// The rest are copies of the first, each a millisecond younger than the one before: creating them one by one
	// through the service would take most of the test's time.
	require.NoError(tb, db.Exec(`INSERT INTO versionstreams SELECT (jsonb_populate_record(v, jsonb_build_object(
		'id', gen_random_uuid(), 'name', 'bulk-' || g, 'created_time', v.created_time + g * interval '1 millisecond'))).*
		FROM versionstreams v, generate_series(1, ?) g`, rows-1).Error)
	require.NoError(tb, db.Exec(`VACUUM ANALYZE versionstreams`).Error)
	return f
}

func (f *listFixture) list(tb testing.TB, opts resource.ListOptions) ([]string, resource.ListResult) {
	tb.Helper()
	var ids []string
	res, err := f.store.List(f.ctx, f.d, opts, func(r *resource.Resource) error {
		ids = append(ids, r.Name)
		return nil
	})
	require.NoError(tb, err)
	return ids, res
}

func TestListCountsExactlyOrByEstimate(t *testing.T) {
	f := newListFixture(t)
	tests := []struct {
		name          string
		opts          resource.ListOptions
		wantItems     int
		wantTotal     int64 // exact; 0 with an estimate
		wantEstimated bool
	}{
		{name: "a full page counts", opts: resource.ListOptions{Page: 3, Size: 100}, wantItems: 100, wantTotal: listRows},
		{name: "a short last page tells the total", opts: resource.ListOptions{Page: 16, Size: 100}, wantItems: 5, wantTotal: listRows},
		{name: "a page past the end counts", opts: resource.ListOptions{Page: 17, Size: 100}, wantTotal: listRows},
		{name: "a short first page tells the total", opts: resource.ListOptions{Page: 1, Size: 100, Search: "name = 'bulk-7'"}, wantItems: 1, wantTotal: 1},
		{name: "an estimate of many matches is the planner's", opts: resource.ListOptions{Page: 2, Size: 100, EstimateCount: true},
			wantItems: 100, wantEstimated: true},
		{name: "an estimate of few matches is counted", opts: resource.ListOptions{Page: 1, Size: 10, EstimateCount: true, Search: "name in ['bulk-1', 'bulk-2', 'bulk-3', 'bulk-40', 'bulk-50', 'bulk-60', 'bulk-70', 'bulk-80', 'bulk-90', 'bulk-100', 'bulk-110', 'bulk-120']"},
			wantItems: 10, wantTotal: 12},
		{name: "no count", opts: resource.ListOptions{Page: 2, Size: 100, NoCount: true, EstimateCount: true}, wantItems: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, res := f.list(t, tt.opts)
			require.Len(t, items, tt.wantItems)
			require.Equal(t, !tt.opts.NoCount, res.Counted)
			require.Equal(t, tt.wantEstimated, res.Estimated)
			if tt.wantEstimated {
				// The statistics of an analyzed table: near the truth, not the truth by construction.
				require.InDelta(t, listRows, res.Total, listRows*0.2)
				return
			}
			require.Equal(t, tt.wantTotal, res.Total)
		})
	}
}

// Numbered pages (the page's ids by OFFSET, then its rows) are the whole list cut in pieces, in its order, for
// every order a list takes.
func TestNumberedPagesCutTheWholeList(t *testing.T) {
	f := newListFixture(t)
	for _, order := range [][]resource.OrderBy{nil, {{Field: "name"}}, {{Field: "name", Desc: true}}, {{Field: "generation"}, {Field: "created_time", Desc: true}}} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			whole, _ := f.list(t, resource.ListOptions{Page: 1, Size: listRows + 10, Order: order, NoCount: true})
			require.Len(t, whole, listRows)
			var pieces []string
			for page := 1; ; page++ {
				items, res := f.list(t, resource.ListOptions{Page: page, Size: 97, Order: order})
				require.EqualValues(t, listRows, res.Total)
				pieces = append(pieces, items...)
				if len(items) < 97 {
					break
				}
			}
			require.Equal(t, whole, pieces)
		})
	}
}

// BenchmarkListPage reads random numbered pages of 100 out of 10,000 resources, with their total, as a list
// request does (borrowed rows, handed over one at a time): the Go side of a list against a real PostgreSQL, for
// -cpuprofile. PostgreSQL's own CPU is make bench-limit's.
func BenchmarkListPage(b *testing.B) {
	const rows, size = 10000, 100
	f := newListFixtureOf(b, rows)
	b.ReportAllocs()
	page := 0
	for b.Loop() {
		page = page*31%(rows/size) + 1
		n := 0
		res, err := f.store.List(f.ctx, f.d, resource.ListOptions{Page: page, Size: size, Borrow: true}, func(*resource.Resource) error {
			n++
			return nil
		})
		if err != nil || n != size || res.Total != rows {
			b.Fatalf("page %d: %d items, total %d, %v", page, n, res.Total, err)
		}
	}
}
