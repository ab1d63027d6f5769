package postgres

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// Shard leases are rows of adapter_shard_leases, one per adapter and shard, and the replicas that share them rows
// of adapter_shard_members. A lease call locks every lease row of its adapter (SELECT … FOR UPDATE, in shard
// order), so that calls of one adapter's replicas are taken one at a time; a status write that carries a lease
// generation locks its one row FOR SHARE, so that it is either stored before a change of holder commits or
// refused after it. The database's clock decides expiry, so the API replicas' clocks do not matter.

var _ resource.ShardLeaseStore = (*Store)(nil)

type shardLeaseRow struct {
	Shard       int
	ShardCount  int
	Holder      *string
	Generation  int64
	ExpiresTime *time.Time
}

type shardMemberRow struct {
	Replica     string
	ExpiresTime time.Time
}

// UpdateShardLeases implements resource.ShardLeaseStore.
func (s *Store) UpdateShardLeases(ctx context.Context, adapter string, count int, plan func(st *resource.ShardLeaseState) (resource.ShardLeaseChanges, error)) error {
	var err error
	for attempt := 1; attempt <= txAttempts; attempt++ {
		err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			st, err := lockShardLeases(tx, adapter, count)
			if err != nil {
				return err
			}
			changes, err := plan(st)
			if err != nil {
				return err
			}
			return writeShardLeases(tx, adapter, st.Now, changes)
		})
		if !retryable(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt*attempt) * 5 * time.Millisecond)
	}
	return err
}

// ShardLeases implements resource.ShardLeaseStore.
func (s *Store) ShardLeases(ctx context.Context, adapter string) (*resource.ShardLeaseState, error) {
	var st *resource.ShardLeaseState
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		st, err = readShardLeases(tx, adapter, "")
		return err
	})
	return st, err
}

// lockShardLeases creates count free leases for an adapter that has none, then locks and reads its leases and
// members. Two first calls of an adapter insert the same keys: the second waits for the first's commit and
// inserts nothing.
func lockShardLeases(tx *gorm.DB, adapter string, count int) (*resource.ShardLeaseState, error) {
	err := tx.Exec(`INSERT INTO adapter_shard_leases (adapter, shard, shard_count)
		SELECT ?, g, ? FROM generate_series(0, ? - 1) AS g
		WHERE NOT EXISTS (SELECT 1 FROM adapter_shard_leases WHERE adapter = ?)
		ON CONFLICT DO NOTHING`, adapter, count, count, adapter).Error
	if err != nil {
		return nil, fmt.Errorf("create %s's shard leases: %w", adapter, err)
	}
	return readShardLeases(tx, adapter, " FOR UPDATE")
}

// readShardLeases reads an adapter's leases and members with the database's clock, with lock as their locking
// clause.
func readShardLeases(tx *gorm.DB, adapter, lock string) (*resource.ShardLeaseState, error) {
	var rows []shardLeaseRow
	if err := tx.Raw(`SELECT shard, shard_count, holder, generation, expires_time FROM adapter_shard_leases
		WHERE adapter = ? ORDER BY shard`+lock, adapter).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read %s's shard leases: %w", adapter, err)
	}
	var members []shardMemberRow
	if err := tx.Raw(`SELECT replica, expires_time FROM adapter_shard_members WHERE adapter = ? ORDER BY replica`+lock,
		adapter).Scan(&members).Error; err != nil {
		return nil, fmt.Errorf("read %s's shard members: %w", adapter, err)
	}
	// The clock is read once the rows are locked (not now(), the transaction's start): calls that waited for one
	// another's locks see times in the order they were granted.
	var now time.Time
	if err := tx.Raw(`SELECT clock_timestamp()`).Scan(&now).Error; err != nil {
		return nil, fmt.Errorf("read the database's clock: %w", err)
	}
	st := &resource.ShardLeaseState{Now: now.UTC().Truncate(time.Microsecond), Leases: make([]resource.ShardLease, len(rows))}
	for i, r := range rows {
		st.ShardCount = r.ShardCount
		st.Leases[i] = resource.ShardLease{Shard: r.Shard, Generation: r.Generation}
		if r.Holder != nil && r.ExpiresTime != nil {
			st.Leases[i].Holder, st.Leases[i].ExpiresTime = *r.Holder, r.ExpiresTime.UTC()
		}
	}
	for _, m := range members {
		st.Members = append(st.Members, resource.ShardMember{Replica: m.Replica, ExpiresTime: m.ExpiresTime.UTC()})
	}
	return st, nil
}

func writeShardLeases(tx *gorm.DB, adapter string, now time.Time, c resource.ShardLeaseChanges) error {
	if err := tx.Exec(`DELETE FROM adapter_shard_leases WHERE adapter = ? AND shard >= ?`, adapter, c.ShardCount).Error; err != nil {
		return fmt.Errorf("drop %s's shards beyond %d: %w", adapter, c.ShardCount, err)
	}
	for _, l := range c.Leases {
		var holder *string
		var expires, renewed *time.Time
		if l.Holder != "" {
			holder, expires, renewed = &l.Holder, &l.ExpiresTime, &now
		}
		err := tx.Exec(`INSERT INTO adapter_shard_leases (adapter, shard, shard_count, holder, generation, renewed_time, expires_time)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (adapter, shard) DO UPDATE SET shard_count = EXCLUDED.shard_count, holder = EXCLUDED.holder,
				generation = EXCLUDED.generation, renewed_time = EXCLUDED.renewed_time, expires_time = EXCLUDED.expires_time`,
			adapter, l.Shard, c.ShardCount, holder, l.Generation, renewed, expires).Error
		if err != nil {
			return fmt.Errorf("write %s's lease on shard %d: %w", adapter, l.Shard, err)
		}
	}
	// Members that stopped asking go; their leases have expired with them.
	if err := tx.Exec(`DELETE FROM adapter_shard_members WHERE adapter = ? AND (expires_time <= ? OR replica = ?)`,
		adapter, now, c.Member.Replica).Error; err != nil {
		return fmt.Errorf("drop %s's expired shard members: %w", adapter, err)
	}
	if c.Leave {
		return nil
	}
	if err := tx.Exec(`INSERT INTO adapter_shard_members (adapter, replica, seen_time, expires_time) VALUES (?, ?, ?, ?)`,
		adapter, c.Member.Replica, now, c.Member.ExpiresTime).Error; err != nil {
		return fmt.Errorf("record %s's shard member %s: %w", adapter, c.Member.Replica, err)
	}
	return nil
}

// CheckShardLease implements resource.Tx.
func (t *txStore) CheckShardLease(adapter string, shard, count int, generation int64) error {
	var rows []shardLeaseRow
	err := t.reader().Raw(`SELECT shard, shard_count, holder, generation, expires_time FROM adapter_shard_leases
		WHERE adapter = ? AND shard = ? FOR SHARE`, adapter, shard).Scan(&rows).Error
	if err != nil {
		return fmt.Errorf("lock %s's lease on shard %d: %w", adapter, shard, err)
	}
	if len(rows) == 1 && rows[0].Holder != nil && rows[0].ShardCount == count && rows[0].Generation == generation {
		return nil
	}
	current := "nobody holds it"
	if len(rows) == 1 && rows[0].Holder != nil {
		current = fmt.Sprintf("%s holds it at generation %d of %d shards", *rows[0].Holder, rows[0].Generation, rows[0].ShardCount)
	}
	return resource.Errorf(resource.CodeLeaseLost, "the report was made under %s's lease on shard %d of %d at generation %d, which is no longer current (%s): "+
		"the replica lost the shard, and its new holder reports on the resource", adapter, shard, count, generation, current)
}
