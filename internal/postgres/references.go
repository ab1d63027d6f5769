package postgres

import (
	"fmt"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// FOR KEY SHARE is the weakest lock that conflicts with the FOR UPDATE a delete takes: a referrer and a delete of
// the row it names serialise, while other referrers and status writes proceed.

func (t *txStore) Referenced(d *resource.Descriptor, name string) (bool, error) {
	var ids []string
	err := rawScan(t.reader().Raw("SELECT id FROM "+d.Table+" WHERE name = ? AND deleted_time IS NULL FOR KEY SHARE", name), &ids)
	if err != nil {
		return false, fmt.Errorf("look up %s %q: %w", d.Kind, name, err)
	}
	return len(ids) > 0, nil
}

func (t *txStore) Referrers(d *resource.Descriptor, field, name string, limit int) ([]string, error) {
	var names []string
	// Containment is what the GIN index on spec serves.
	err := rawScan(t.reader().Raw("SELECT name FROM "+d.Table+" WHERE spec @> jsonb_build_object(?::text, ?::text) AND deleted_time IS NULL ORDER BY name LIMIT ?",
		field, name, limit), &names)
	if err != nil {
		return nil, fmt.Errorf("find %s naming %q in %s: %w", d.Kind, name, field, err)
	}
	return names, nil
}

func (t *txStore) ReportReferrers(d *resource.Descriptor, adapter, key, name string, limit int) ([]string, int, error) {
	var rows []struct {
		Name  string
		Total int
	}
	// Kind, adapter and key are plain words (resource.Descriptor.Check), written into the text so that the partial
	// expression index on data->>'<key>' for that kind and adapter serves the query (a parameter would not match
	// the index's predicate).
	err := rawScan(t.reader().Raw("SELECT r.name, count(*) OVER () AS total FROM adapter_statuses s JOIN "+d.Table+" r ON r.id = s.resource_id"+
		" WHERE s.kind = '"+d.Kind+"' AND s.adapter = '"+adapter+"' AND s.data->>'"+key+"' = ? ORDER BY r.name LIMIT ?", name, limit), &rows)
	if err != nil {
		return nil, 0, fmt.Errorf("find %s that %s places on %q: %w", d.Kind, adapter, name, err)
	}
	if len(rows) == 0 {
		return nil, 0, nil
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	return names, rows[0].Total, nil
}
