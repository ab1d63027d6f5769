package postgres_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// The table template makes the table the released migrations made, ALTERs included: the same columns (type,
// nullability, default, in the same order once the later ones are appended) and the same indexes. A column added to
// every kind must be added to the template, or this fails.
func TestKindTableTemplateIsTheReleasedTables(t *testing.T) {
	db := harness.OpenGorm(t, harness.NewDatabase(t))
	require.NoError(t, postgres.Migrate(t.Context(), db,
		postgres.KindTableMigration("test_widgets", "widgets", ""),
		postgres.KindTableMigration("test_gadgets", "gadgets", "widgets")))
	for _, tc := range []struct{ released, templated string }{{"versionstreams", "widgets"}, {"clusters", "widgets"}, {"nodepools", "gadgets"}} {
		t.Run(tc.released, func(t *testing.T) {
			require.Equal(t, columns(t, db, tc.released), columns(t, db, tc.templated))
			require.Equal(t, indexes(t, db, tc.released), indexes(t, db, tc.templated))
		})
	}
}

// columns lists a table's columns with their type, nullability and default, in order.
func columns(t *testing.T, db *gorm.DB, table string) []string {
	t.Helper()
	var out []string
	require.NoError(t, db.Raw(`SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
		FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position`, table).Scan(&out).Error)
	require.NotEmpty(t, out, table)
	return out
}

// indexes lists a table's index definitions with the table's name taken out.
func indexes(t *testing.T, db *gorm.DB, table string) []string {
	t.Helper()
	var defs []string
	require.NoError(t, db.Raw(`SELECT indexdef FROM pg_indexes WHERE tablename = ? ORDER BY indexname`, table).Scan(&defs).Error)
	for i, d := range defs {
		defs[i] = strings.ReplaceAll(d, table, "<table>")
	}
	return defs
}
