package postgres

import (
	"context"
	"fmt"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// Confine is confine, for the external tests of row-level security: a transaction confined exactly as the store
// confines a request's.
func Confine(tx *gorm.DB, tenant string) error { return confine(tx, tenant) }

// MigrateTo applies the released migrations up to and including id, as Migrate would have at the release that
// ended with id, so that a test can build a database of an older schema and then Migrate it.
func MigrateTo(ctx context.Context, db *gorm.DB, id string) error {
	opts := *gormigrate.DefaultOptions
	opts.TableName = migrationsTable
	opts.UseTransaction = true
	if err := gormigrate.New(db.WithContext(ctx), &opts, migrations()).MigrateTo(id); err != nil {
		return fmt.Errorf("migrate to %s: %w", id, err)
	}
	return nil
}
