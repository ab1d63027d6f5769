package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// TestDeferredWritesCommitNothingWhenTheyFail checks the transaction pipeline (pipeline.go) against PostgreSQL:
// WriteReport's and Create's statements are held back and sent with what follows, COMMIT included, so each way
// one of them can fail must leave the database as it was, and leave the connection fit for the next transaction
// (the pool has one connection, so every case and the final write run on the same one).
func TestDeferredWritesCommitNothingWhenTheyFail(t *testing.T) {
	const adapter = "a"
	set := kindsRequiring(t, map[string][]string{"versionstream": {adapter}})
	db := harness.OpenGorm(t, harness.NewDatabase(t))
	pool, err := db.DB()
	require.NoError(t, err)
	pool.SetMaxOpenConns(1)
	store := postgres.NewStore(db, set.All)
	svc := resource.NewService(store, set.All)
	d := set.VersionStream
	ctx := resource.WithCaller(context.Background(), resource.Caller{Name: "test", Admin: true})
	r, err := svc.Create(ctx, d, "", resource.CreateInput{Name: "s", Spec: json.RawMessage(`{"target_version":"4.16"}`)})
	require.NoError(t, err)
	_, _, err = svc.PutStatus(ctx, d, "", r.ID, conditions.Report{Adapter: adapter, ObservedGeneration: 1, ObservedTime: time.Now(),
		Conditions: []conditions.Reported{{Type: conditions.Available, Status: conditions.True, Reason: "Ok"}}})
	require.NoError(t, err)

	type dbState struct {
		Version, Events, Streams, Reported int64
		Labels                             string
	}
	state := func() dbState {
		t.Helper()
		var s dbState
		require.NoError(t, db.Raw(`SELECT (SELECT version FROM versionstreams WHERE id = ?) AS version,
			(SELECT labels::text FROM versionstreams WHERE id = ?) AS labels,
			(SELECT count(*) FROM event_staging) AS events, (SELECT count(*) FROM versionstreams) AS streams,
			(SELECT observed_generation FROM adapter_statuses WHERE resource_id = ? AND adapter = ?) AS reported`,
			r.ID, r.ID, r.ID, adapter).Scan(&s).Error)
		return s
	}
	// report is a report of generation 1 that the store writes without the service's checks.
	report := func(generation int64) *resource.AdapterStatus {
		now := time.Now().UTC().Truncate(time.Microsecond)
		return &resource.AdapterStatus{ResourceID: r.ID, Adapter: adapter, ObservedGeneration: generation, ObservedTime: now,
			LastReportTime: now, CreatedTime: now, Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`),
			Conditions: []conditions.Condition{{Type: conditions.Available, Status: conditions.False, Reason: "Changed",
				ObservedGeneration: generation, LastTransitionTime: now, LastUpdatedTime: now}}}
	}
	lockAndWrite := func(tx resource.Tx, generation int64) (*resource.Resource, error) {
		locked, _, err := tx.LockReports(d, "", r.ID)
		require.NoError(t, err)
		locked.Status.Phase = conditions.PhaseDegraded
		return locked, tx.WriteReport(d, locked, report(generation), true, resource.EventStatus, nil)
	}
	boom := errors.New("boom")

	tests := []struct {
		name         string
		fn           func(tx resource.Tx) error
		wantCode     resource.Code
		wantErr      error
		wantSQLState string
	}{
		{name: "a stale report, sent with the COMMIT", wantCode: resource.CodeStatusStale, fn: func(tx resource.Tx) error {
			_, err := lockAndWrite(tx, 0)
			return err
		}},
		{name: "an error after a deferred report", wantErr: boom, fn: func(tx resource.Tx) error {
			if _, err := lockAndWrite(tx, 1); err != nil {
				return err
			}
			return boom
		}},
		{name: "a stale report after a write", wantCode: resource.CodeStatusStale, fn: func(tx resource.Tx) error {
			locked, err := tx.Lock(d, "", r.ID)
			require.NoError(t, err)
			locked.Labels = map[string]string{"written": "yes"}
			if err := tx.Save(d, locked, resource.EventUpdated); err != nil {
				return err
			}
			_, err = lockAndWrite(tx, 0)
			return err
		}},
		{name: "a taken name in a deferred create", wantCode: resource.CodeNameTaken, fn: func(tx resource.Tx) error {
			taken := *r
			taken.ID = "0193b1c4-0000-7000-8000-000000000001"
			_, err := tx.Create(d, &taken, nil)
			return err
		}},
		{name: "a taken name in a deferred create, flushed", wantCode: resource.CodeNameTaken, fn: func(tx resource.Tx) error {
			taken := *r
			taken.ID = "0193b1c4-0000-7000-8000-000000000002"
			if _, err := tx.Create(d, &taken, nil); err != nil {
				return err
			}
			return tx.Flush()
		}},
		{name: "no such resource", wantCode: resource.CodeNotFound, fn: func(tx resource.Tx) error {
			_, _, err := tx.LockReports(d, "", "0193b1c4-0000-7000-8000-00000000000f")
			return err
		}},
		{name: "an SQL error in the first round trip", wantSQLState: "22P02", fn: func(tx resource.Tx) error {
			_, _, err := tx.LockReports(d, "", "not-a-uuid")
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := state()
			err := store.InTx(ctx, tt.fn)
			require.Error(t, err)
			var pgErr *pgconn.PgError
			switch {
			case tt.wantErr != nil:
				require.ErrorIs(t, err, tt.wantErr)
			case tt.wantSQLState != "":
				require.ErrorAs(t, err, &pgErr)
				require.Equal(t, tt.wantSQLState, pgErr.Code)
			default:
				require.Equal(t, tt.wantCode, resource.ErrorCode(err), "%v", err)
			}
			require.Equal(t, before, state(), "nothing is written")
		})
	}

	before := state()
	require.NoError(t, store.InTx(ctx, func(tx resource.Tx) error {
		_, err := lockAndWrite(tx, 1)
		return err
	}), "the connection serves the next transaction")
	after := state()
	require.Equal(t, before.Version+1, after.Version, "the report's aggregate is saved")
	require.Equal(t, before.Events+1, after.Events, "and its event staged")
}
