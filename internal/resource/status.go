package resource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// AdapterStatus is one adapter's latest report about one resource, as stored.
type AdapterStatus struct {
	ResourceID         string
	Adapter            string
	ObservedGeneration int64
	ObservedTime       time.Time
	Conditions         []conditions.Condition
	Data               json.RawMessage // a JSON object
	Metadata           json.RawMessage // a JSON object
	CreatedTime        time.Time
	LastReportTime     time.Time
}

// ValidateReport checks a report on its own (not against the resource), listing every problem as an *Error with
// CodeInvalid; the rules are the condition vocabulary's (conditions.Report.Validate).
func ValidateReport(rep *conditions.Report, now time.Time) error {
	problems := rep.Validate(now)
	if len(problems) == 0 {
		return nil
	}
	fields := make([]FieldError, len(problems))
	for i, p := range problems {
		fields[i] = FieldError{Field: p.Field, Message: p.Message}
	}
	return &Error{Code: CodeInvalid, Message: "the status report is not valid", Fields: fields}
}

// mergeConditions stamps reported conditions with times: last_transition_time moves only when a condition's
// status differs from the stored one of the same type.
func mergeConditions(reported []conditions.Reported, stored []conditions.Condition, generation int64, now time.Time) []conditions.Condition {
	out := make([]conditions.Condition, len(reported))
	for i, c := range reported {
		out[i] = conditions.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
			ObservedGeneration: generation, LastTransitionTime: now, LastUpdatedTime: now}
		for _, old := range stored {
			if old.Type == c.Type && old.Status == c.Status && !old.LastTransitionTime.IsZero() {
				out[i].LastTransitionTime = old.LastTransitionTime
				break
			}
		}
	}
	return out
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// PutStatus stores an adapter's report about a resource and, in the same transaction under the resource's row
// lock, recomputes the resource's aggregated status; a deleting resource that the report finalizes is removed.
// It returns the stored report and whether it is the adapter's first. Errors: CodeInvalid for a malformed report,
// CodeUnprocessable for a generation the resource has not reached, CodeStatusStale (nothing stored) for a report
// older than the stored one, CodeLeaseLost (nothing stored) for a report made under a shard lease (its metadata's
// lease_generation) that is no longer the current holder's.
func (s *Service) PutStatus(ctx context.Context, d *Descriptor, parentID, id string, rep conditions.Report) (*AdapterStatus, bool, error) {
	if err := checkIDs(d, parentID, id); err != nil {
		return nil, false, err
	}
	now := s.now()
	if err := ValidateReport(&rep, now); err != nil {
		s.observer.StatusWritten(d.Kind, "invalid")
		return nil, false, err
	}
	stamp, err := readLeaseStamp(rep.Metadata, id)
	if err != nil {
		s.observer.StatusWritten(d.Kind, "invalid")
		return nil, false, err
	}
	rep.ObservedTime = rep.ObservedTime.UTC().Truncate(time.Microsecond)
	var out *AdapterStatus
	var created, unchanged bool
	// Two statements: one reads what the write depends on under the resource's lock, one writes the report and,
	// when the aggregate changed, the resource. A report that only confirms (a heartbeat) writes one row.
	err = s.store.InTx(ctx, func(tx Tx) error {
		r, reports, err := tx.LockReports(d, parentID, id)
		if err != nil {
			return err
		}
		// Fencing: the lease is checked, and locked against a change of holder, in the transaction that saves the
		// report, so a replica that lost the shard can store nothing after the new holder was granted it.
		if stamp != nil {
			if err := tx.CheckShardLease(rep.Adapter, *stamp.Shard, *stamp.ShardCount, *stamp.LeaseGeneration); err != nil {
				return err
			}
		}
		if rep.ObservedGeneration > r.Generation {
			return &Error{Code: CodeUnprocessable, Message: fmt.Sprintf("observed_generation %d is ahead of the %s's generation %d", rep.ObservedGeneration, d.Kind, r.Generation),
				Fields: []FieldError{{Field: "observed_generation", Message: fmt.Sprintf("must be at most %d", r.Generation)}}}
		}
		var stored *AdapterStatus
		for i := range reports {
			if reports[i].Adapter == rep.Adapter {
				stored = &reports[i]
			}
		}
		st := &AdapterStatus{ResourceID: r.ID, Adapter: rep.Adapter, CreatedTime: now}
		if stored != nil && stored.ObservedGeneration > 0 {
			if err := checkFresh(&rep, stored); err != nil {
				return err
			}
			st.CreatedTime = stored.CreatedTime
		} else {
			created = true
		}
		var previous []conditions.Condition
		var storedData json.RawMessage
		if stored != nil {
			previous, storedData = stored.Conditions, stored.Data
		}
		// A report that says again what the stored one says, within a heartbeat of it, writes nothing: a settled
		// fleet's re-checks cost this read and no write, no event and no WAL. Unless the aggregate moves (it reads
		// the clock) or the report would finalize a deleting resource, which the write path must act on.
		if stored != nil && s.heartbeat > 0 && now.Sub(stored.LastReportTime) < s.heartbeat && sameReport(&rep, stored) {
			if status, finalized := Aggregate(d, r, reports, now); sameStatus(status, r.Status) && (!finalized || !r.Deleting()) {
				unchanged = true
				kept := *stored
				out = &kept
				return nil
			}
		}
		if err := checkReportedRefs(tx, d, rep.Adapter, rep.Data, storedData); err != nil {
			return err
		}
		st.ObservedGeneration, st.ObservedTime, st.LastReportTime = rep.ObservedGeneration, rep.ObservedTime, now
		st.Conditions = mergeConditions(rep.Conditions, previous, rep.ObservedGeneration, now)
		st.Data, st.Metadata = orEmptyObject(rep.Data), orEmptyObject(rep.Metadata)
		out = st
		if stored != nil {
			*stored = *st
		} else {
			reports = append(reports, *st)
		}
		status, finalized := Aggregate(d, r, reports, now)
		phase := r.Status.Phase
		changed := !sameStatus(status, r.Status)
		s.observer.Aggregated(d.Kind, status.Phase, changed)
		// Most reports are heartbeats that change nothing; rewriting the resource row for them would only churn.
		if changed {
			r.Status = status
		}
		// Only a move of the phase is history: a settled fleet's reports add nothing to it.
		var history *HistoryEntry
		if phase != r.Status.Phase {
			entry := statusEntry(r, phase, CallerFrom(ctx).Name, st)
			history = &entry
		}
		if err := tx.WriteReport(d, r, st, changed, EventStatus, history); err != nil {
			return err
		}
		_, err = s.removeIfDone(tx, d, r, finalized, nil)
		return err
	})
	outcome := statusOutcome(created, err)
	if err == nil && unchanged {
		outcome = "unchanged"
	}
	s.observer.StatusWritten(d.Kind, outcome)
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// sameReport tells whether rep says what stored says: the same generation, the same conditions (type, status,
// reason and message, in order) and the same data and metadata as JSON values. observed_time is left out: it
// is when the adapter looked, which moves on every re-check.
func sameReport(rep *conditions.Report, stored *AdapterStatus) bool {
	if rep.ObservedGeneration != stored.ObservedGeneration || len(rep.Conditions) != len(stored.Conditions) {
		return false
	}
	for i, c := range rep.Conditions {
		o := &stored.Conditions[i]
		if c.Type != o.Type || c.Status != o.Status || c.Reason != o.Reason || c.Message != o.Message ||
			o.ObservedGeneration != rep.ObservedGeneration {
			return false
		}
	}
	return sameJSON(orEmptyObject(rep.Data), stored.Data) && sameJSON(orEmptyObject(rep.Metadata), stored.Metadata)
}

// sameJSON compares two JSON texts as values. The stored one is jsonb's spelling (its own key order and
// spacing), so bytes rarely match; numbers compare by their text (json.Number), so that two numbers a float64
// cannot tell apart are not taken for one: a spelling jsonb changed (1e2 for 100) reads as different, which
// only costs a write.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, errA := decodeValue(a)
	vb, errB := decodeValue(b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}

func decodeValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func statusOutcome(created bool, err error) string {
	switch {
	case err == nil && created:
		return "created"
	case err == nil:
		return "updated"
	case ErrorCode(err) == CodeStatusStale || ErrorCode(err) == CodeLeaseLost:
		return "stale"
	case ErrorCode(err) == CodeInternal || ErrorCode(err) == CodeUnavailable:
		return "error"
	}
	return "invalid"
}

// checkFresh refuses a report of an older generation than the stored one. At the same generation the report
// the server receives last wins, whatever its observed_time says: reports on one resource are taken one at a time
// under its row lock, so that order is the server's, while observed_time is the clock of whichever adapter replica
// sent it, and a replica whose clock runs behind would otherwise have its newer observation refused as stale.
func checkFresh(rep *conditions.Report, stored *AdapterStatus) error {
	if rep.ObservedGeneration < stored.ObservedGeneration {
		return Errorf(CodeStatusStale, "a report of generation %d from %s is already stored; this one observed generation %d",
			stored.ObservedGeneration, rep.Adapter, rep.ObservedGeneration)
	}
	return nil
}

// ListStatuses returns the adapters' reports about a resource (never a placeholder of an adapter that has not
// reported), ordered by adapter.
func (s *Service) ListStatuses(ctx context.Context, d *Descriptor, parentID, id string) ([]AdapterStatus, error) {
	ctx = unconfined(ctx, d)
	if _, err := s.Get(ctx, d, parentID, id); err != nil {
		return nil, err
	}
	all, err := s.store.Statuses(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]AdapterStatus, 0, len(all))
	for i := range all {
		if all[i].ObservedGeneration > 0 {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// ForceDelete removes a resource and its whole subtree at once, whatever the adapters have reported. It returns
// the resource as it was.
func (s *Service) ForceDelete(ctx context.Context, d *Descriptor, parentID, id string) (*Resource, error) {
	ctx = unconfined(ctx, d)
	return s.withLocked(ctx, d, parentID, id, func(tx Tx, r *Resource) error {
		if err := s.checkUnprotected(tx, d, r); err != nil {
			return err
		}
		if err := tx.Remove(d, r.ID, HistoryForceDeleted); err != nil {
			return err
		}
		if d.Parent == nil {
			return nil
		}
		// The parent may have been waiting for this child to finish its own delete.
		parent, err := tx.Lock(d.Parent, "", r.ParentID)
		if err != nil || !parent.Deleting() {
			return err
		}
		finalized, err := s.reaggregateOne(tx, d.Parent, parent)
		if err != nil {
			return err
		}
		_, err = s.removeIfDone(tx, d.Parent, parent, finalized, nil)
		return err
	})
}

// sameStatus compares two aggregates ignoring when they were computed (last_updated_time).
func sameStatus(a, b Status) bool {
	if a.Phase != b.Phase || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			x.ObservedGeneration != y.ObservedGeneration || !x.LastTransitionTime.Equal(y.LastTransitionTime) {
			return false
		}
	}
	return true
}
