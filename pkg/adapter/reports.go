package adapter

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// reportCache remembers the last report this replica posted about each resource, so that a re-check does not read
// back what the runtime itself wrote: a settled resource then costs one read and one write of the API per
// re-check. It is only right while one replica reports on a resource, which sharding guarantees (replicas of one
// shard must not run side by side: a StatefulSet, not a Deployment, where replicas shard). A refused (stale) or
// failed post, and a resource that is gone, drop the entry; the next reconcile reads the API.
type reportCache struct {
	mu      sync.Mutex
	reports map[Key]*Report
}

func newReportCache() *reportCache { return &reportCache{reports: map[Key]*Report{}} }

// get returns the cached report about key, or nil.
func (c *reportCache) get(key Key) *Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reports[key]
}

// len returns how many reports the cache holds.
func (c *reportCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reports)
}

// forget drops key's report.
func (c *reportCache) forget(key Key) {
	c.mu.Lock()
	delete(c.reports, key)
	c.mu.Unlock()
}

// posted records a report the API accepted, as the API stores it: data through JSON (numbers become float64), and
// conditions stamped with the generation and a transition time that moves only when the status flips.
func (c *reportCache) posted(key Key, report api.AdapterStatusReport, now time.Time) {
	r := &Report{ObservedGeneration: report.ObservedGeneration, ObservedTime: report.ObservedTime}
	if report.Data != nil {
		// The reconciler's own map could change after it returned; a JSON copy cannot, and has the API's types.
		raw, err := json.Marshal(*report.Data)
		if err != nil || json.Unmarshal(raw, &r.Data) != nil {
			c.forget(key) // the API would have refused it; checked() made sure this does not happen
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	previous := c.reports[key]
	r.Conditions = make([]conditions.Condition, len(report.Conditions))
	for i, rc := range report.Conditions {
		cond := conditions.Condition{Type: rc.Type, Status: conditions.Status(rc.Status), Reason: deref(rc.Reason), Message: deref(rc.Message),
			ObservedGeneration: report.ObservedGeneration, LastTransitionTime: now, LastUpdatedTime: now}
		if prev := previous.Condition(rc.Type); prev != nil && prev.Status == cond.Status {
			cond.LastTransitionTime = prev.LastTransitionTime
		}
		r.Conditions[i] = cond
	}
	c.reports[key] = r
}
