package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// requiredLockKey serialises migrate runs that set the required adapters together.
const requiredLockKey = 0x48465241 // "HFRA"

// RequiredAdapters maps a kind (as resource.Descriptor.Kind spells it) to the adapters that must report on its
// resources before they are Ready or, when deleted, removed.
type RequiredAdapters map[string][]string

// Equal reports whether r and o require the same adapters of every kind, in any order; a kind missing from one
// requires none.
func (r RequiredAdapters) Equal(o RequiredAdapters) bool {
	for _, kind := range slices.Concat(slices.Collect(maps.Keys(r)), slices.Collect(maps.Keys(o))) {
		a, b := slices.Sorted(slices.Values(r[kind])), slices.Sorted(slices.Values(o[kind]))
		if !slices.Equal(a, b) {
			return false
		}
	}
	return true
}

type requiredRow struct {
	Kind     string
	Adapters []byte // a JSON array
}

// LoadRequiredAdapters returns the database's required adapters, or nil when none were ever set.
func LoadRequiredAdapters(ctx context.Context, db *gorm.DB) (RequiredAdapters, error) {
	var rows []requiredRow
	if err := rawScan(db.WithContext(ctx).Raw("SELECT kind, array_to_json(adapters) AS adapters FROM required_adapters"), &rows); err != nil {
		return nil, fmt.Errorf("read required adapters: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	out := RequiredAdapters{}
	for _, r := range rows {
		var adapters []string
		if err := json.Unmarshal(r.Adapters, &adapters); err != nil {
			return nil, fmt.Errorf("decode required adapters of %s: %w", r.Kind, err)
		}
		out[r.Kind] = adapters
	}
	return out, nil
}

// SetRequiredAdapters replaces the database's required adapters with want (a kind of kinds that want does not
// name requires none) and returns what they were (nil if never set).
func SetRequiredAdapters(ctx context.Context, db *gorm.DB, kinds []string, want RequiredAdapters) (RequiredAdapters, error) {
	var before RequiredAdapters
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", requiredLockKey).Error; err != nil {
			return fmt.Errorf("lock required adapters: %w", err)
		}
		var err error
		if before, err = LoadRequiredAdapters(ctx, tx); err != nil {
			return err
		}
		return writeRequired(tx, kinds, want)
	})
	return before, err
}

func writeRequired(tx *gorm.DB, kinds []string, want RequiredAdapters) error {
	for kind := range want {
		if !slices.Contains(kinds, kind) {
			return fmt.Errorf("required adapters name kind %q, which does not exist", kind)
		}
	}
	for _, kind := range kinds {
		// Adapter names are DNS labels, so this array literal needs no quoting; it is still passed as a parameter.
		adapters := "{" + strings.Join(want[kind], ",") + "}"
		err := tx.Exec(`INSERT INTO required_adapters (kind, adapters, updated_time) VALUES (?, ?::text[], now())
			ON CONFLICT (kind) DO UPDATE SET adapters = EXCLUDED.adapters, updated_time = now()`, kind, adapters).Error
		if err != nil {
			return fmt.Errorf("store required adapters of %s: %w", kind, err)
		}
	}
	return nil
}
