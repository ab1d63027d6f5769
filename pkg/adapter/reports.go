package adapter

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// reportCache remembers the last report this replica posted about each resource, so that a re-check does not read
// back what the runtime itself wrote, and does not write again what it wrote last (unchanged): a settled resource
// then costs one read of the API per re-check, and a report per heartbeat. It is only right while one replica
// reports on a resource: one shard's holder at a time (a static shard, or the lease's holder, whose reports the
// API fences). A refused (stale, lease lost) or failed post, and a resource that is gone, drop the entry; the next
// reconcile reads the API.
type reportCache struct {
	mu      sync.Mutex
	reports map[Key]*postedReport
}

// postedReport is a report as the API stores it, what was posted to say it, and when.
type postedReport struct {
	report *Report
	// said is the posted report without its observed time (generation, conditions, data, metadata), as JSON.
	said []byte
	at   time.Time
}

func newReportCache() *reportCache { return &reportCache{reports: map[Key]*postedReport{}} }

// get returns the cached report about key, or nil.
func (c *reportCache) get(key Key) *Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.reports[key]; p != nil {
		return p.report
	}
	return nil
}

// unchanged reports whether report says exactly what the last report posted about key said (generation,
// conditions, data and metadata), and that post is younger than heartbeat: posting it would only move its
// observed time. A heartbeat of 0 posts every report.
func (c *reportCache) unchanged(key Key, report api.AdapterStatusReport, now time.Time, heartbeat time.Duration) bool {
	if heartbeat <= 0 {
		return false
	}
	said, err := sayingOf(report)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.reports[key]
	return p != nil && now.Sub(p.at) < heartbeat && bytes.Equal(p.said, said)
}

// sayingOf is what a report says, without when it was observed; encoding/json sorts map keys, so equal reports
// encode alike.
func sayingOf(report api.AdapterStatusReport) ([]byte, error) {
	report.ObservedTime = time.Time{}
	return json.Marshal(report)
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
	said, err := sayingOf(report)
	if err != nil {
		c.forget(key)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var previous *Report
	if p := c.reports[key]; p != nil {
		previous = p.report
	}
	r.Conditions = make([]conditions.Condition, len(report.Conditions))
	for i, rc := range report.Conditions {
		cond := conditions.Condition{Type: rc.Type, Status: conditions.Status(rc.Status), Reason: deref(rc.Reason), Message: deref(rc.Message),
			ObservedGeneration: report.ObservedGeneration, LastTransitionTime: now, LastUpdatedTime: now}
		if prev := previous.Condition(rc.Type); prev != nil && prev.Status == cond.Status {
			cond.LastTransitionTime = prev.LastTransitionTime
		}
		r.Conditions[i] = cond
	}
	c.reports[key] = &postedReport{report: r, said: said, at: now}
}
