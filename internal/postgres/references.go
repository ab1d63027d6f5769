package postgres

import (
	"fmt"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// FOR KEY SHARE is the weakest lock that conflicts with the FOR UPDATE a delete takes: a referrer and a delete of
// the row it names serialise, while other referrers and status writes proceed.

func (t *txStore) Referenced(d *resource.Descriptor, name string) (bool, error) {
	var ids []string
	err := rawScan(t.db.Raw("SELECT id FROM "+d.Table+" WHERE name = ? AND deleted_time IS NULL FOR KEY SHARE", name), &ids)
	if err != nil {
		return false, fmt.Errorf("look up %s %q: %w", d.Kind, name, err)
	}
	return len(ids) > 0, nil
}

func (t *txStore) Referrers(d *resource.Descriptor, field, name string, limit int) ([]string, error) {
	var names []string
	// Containment is what the GIN index on spec serves.
	err := rawScan(t.db.Raw("SELECT name FROM "+d.Table+" WHERE spec @> jsonb_build_object(?::text, ?::text) AND deleted_time IS NULL ORDER BY name LIMIT ?",
		field, name, limit), &names)
	if err != nil {
		return nil, fmt.Errorf("find %s naming %q in %s: %w", d.Kind, name, field, err)
	}
	return names, nil
}
