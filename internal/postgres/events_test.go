package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/test/harness"
)

// A write queues no notification: a NOTIFY in a write transaction takes PostgreSQL's database-wide notify lock at
// commit, which serialised every write. Writes stage their events with plain INSERTs (create, update, report and
// removal paths), so what could still notify is a trigger on the staging table; the sequencer learns of staged
// events by polling and by its own process's poke, and notifies once per batch (TestSequencerTakesOverFromAFrozenLeader
// and the feed's tests run without any trigger).
func TestWritesQueueNoNotification(t *testing.T) {
	ctx := t.Context()
	db, err := pgx.Connect(ctx, harness.NewDatabase(t))
	require.NoError(t, err)
	defer func() { _ = db.Close(ctx) }()
	rows, err := db.Query(ctx, `SELECT tgname FROM pg_trigger WHERE tgrelid = 'event_staging'::regclass AND NOT tgisinternal`)
	require.NoError(t, err)
	triggers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, triggers, "triggers on event_staging")
	var notifying int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM pg_proc WHERE prosrc ILIKE '%pg_notify%'
		AND pronamespace = 'public'::regnamespace`).Scan(&notifying))
	require.Zero(t, notifying, "functions in the schema that notify")
}
