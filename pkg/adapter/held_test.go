package adapter

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

func TestReportUnchanged(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	key := Key{Kind: "clusters", ID: "a"}
	obj := &Object{Generation: 3}
	base := func() api.AdapterStatusReport {
		return buildReport("applier", obj, Outcome{Available: conditions.Reported{Status: conditions.True, Reason: "Up"},
			Data: map[string]any{"n": 3, "m": map[string]any{"b": 1, "a": "x"}}}, nil, false, now, map[string]any{"replica": "r0"})
	}
	tests := []struct {
		name      string
		change    func(*api.AdapterStatusReport)
		after     time.Duration
		heartbeat time.Duration
		want      bool
	}{
		{name: "the same, later: skipped", after: 30 * time.Second, heartbeat: time.Minute, want: true},
		{name: "the same, a heartbeat later: posted", after: time.Minute, heartbeat: time.Minute},
		{name: "no heartbeat: always posted", after: time.Second},
		{name: "a new generation", change: func(r *api.AdapterStatusReport) { r.ObservedGeneration = 4 }, heartbeat: time.Minute},
		{name: "a condition's message", change: func(r *api.AdapterStatusReport) { r.Conditions[0].Message = ptr("moved") }, heartbeat: time.Minute},
		{name: "a condition's status", change: func(r *api.AdapterStatusReport) { r.Conditions[0].Status = api.ReportedConditionStatusFalse }, heartbeat: time.Minute},
		{name: "data", change: func(r *api.AdapterStatusReport) { r.Data = &map[string]any{"n": 4} }, heartbeat: time.Minute},
		{name: "metadata", change: func(r *api.AdapterStatusReport) { r.Metadata = &map[string]any{"replica": "r1"} }, heartbeat: time.Minute},
		{name: "only the observed time", change: func(r *api.AdapterStatusReport) { r.ObservedTime = now.Add(time.Hour) }, heartbeat: time.Minute, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newReportCache()
			c.posted(key, base(), now)
			next := base()
			if tt.change != nil {
				tt.change(&next)
			}
			require.Equal(t, tt.want, c.unchanged(key, next, now.Add(tt.after), tt.heartbeat))
			require.False(t, c.unchanged(Key{Kind: "clusters", ID: "b"}, base(), now, time.Minute), "a resource never posted about")
			c.forget(key)
			require.False(t, c.unchanged(key, base(), now, time.Minute), "a forgotten report")
		})
	}
}

func TestObjectOfWatchEvent(t *testing.T) {
	id, parent := uuid.New(), uuid.New()
	event := func(object string) *api.WatchEvent {
		return &api.WatchEvent{Id: id, Generation: 2, Object: []byte(object)}
	}
	full := `{"id":"` + id.String() + `","kind":"NodePool","href":"/x","name":"p","generation":2,"labels":{"a":"b"},"spec":{"replicas":3},
		"status":{"phase":"NotReady","conditions":[{"type":"Ready","status":"False","reason":"AdaptersMissing","observed_generation":0}]},
		"owner_references":{"id":"` + parent.String() + `","kind":"Cluster","href":"/y"}}`
	tests := []struct {
		name    string
		kind    *Kind
		event   *api.WatchEvent
		want    *Object
		wantErr bool
	}{
		{name: "the whole resource", kind: NodePools(), event: event(full), want: &Object{Kind: "NodePool", ID: id.String(), ParentID: parent.String(),
			Name: "p", Generation: 2, Labels: map[string]string{"a": "b"}, Spec: []byte(`{"replicas":3}`), Phase: "NotReady",
			Conditions: []conditions.Condition{{Type: "Ready", Status: conditions.False, Reason: "AdaptersMissing"}}}},
		{name: "no resource: read it", kind: NodePools(), event: &api.WatchEvent{Id: id}},
		{name: "only the id: read it", kind: Clusters(), event: event(`{"id":"` + id.String() + `","kind":"Cluster","href":"/x"}`)},
		{name: "a child without its parent: read it", kind: NodePools(), event: event(`{"id":"` + id.String() + `","kind":"NodePool","href":"/x","name":"p","generation":2,"spec":{},"status":{"phase":"Ready","conditions":[]}}`)},
		{name: "not JSON", kind: Clusters(), event: event(`{`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := objectOf(tt.kind, tt.event)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestNeverReported(t *testing.T) {
	avail := conditions.AdapterAvailable("hostedcluster-applier")
	tests := []struct {
		name  string
		conds []conditions.Condition
		want  bool
	}{
		{name: "the API's placeholder", conds: []conditions.Condition{{Type: avail, Status: conditions.Unknown, Reason: conditions.ReasonNotReported}}, want: true},
		{name: "a report whose reconciler said nothing of Available", conds: []conditions.Condition{{Type: avail, Status: conditions.Unknown,
			Reason: conditions.ReasonNotReported, ObservedGeneration: 1}}},
		{name: "a report", conds: []conditions.Condition{{Type: avail, Status: conditions.True, Reason: "Up", ObservedGeneration: 1}}},
		{name: "not a required adapter: unknown", conds: []conditions.Condition{{Type: "Ready", Status: conditions.False}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, neverReported(&Object{Conditions: tt.conds}, "hostedcluster-applier"))
		})
	}
}

func TestHeldObjects(t *testing.T) {
	k := Key{Kind: "clusters", ID: "a"}
	h := newHeldObjects()
	old, cur := &Object{Generation: 1}, &Object{Generation: 2}
	h.put(k, cur)
	h.put(k, old)
	require.Same(t, cur, h.take(k), "an older generation does not replace a newer one")
	require.Nil(t, h.take(k), "taken once")
	h.put(k, old)
	h.put(k, cur)
	h.drop(k, old)
	require.Equal(t, 1, h.len(), "drop lets go only of its own copy")
	h.forget(k)
	require.Nil(t, h.take(k))
}

func TestParentCache(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	a, b := &Object{ID: "a"}, &Object{ID: "b"}
	tests := []struct {
		name   string
		after  time.Duration
		maxAge time.Duration
		want   *Object
	}{
		{name: "younger than its age", after: time.Minute, maxAge: 10 * time.Minute, want: a},
		{name: "as old as its age", after: 10 * time.Minute, maxAge: 10 * time.Minute},
		{name: "no age: never served", maxAge: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newParentCache()
			c.put("a", a, now, time.Hour)
			require.Same(t, tt.want, c.get("a", now.Add(tt.after), tt.maxAge))
			require.Nil(t, c.get("b", now, time.Hour), "never read")
		})
	}
	c := newParentCache()
	c.put("a", a, now, time.Minute)
	c.put("b", b, now.Add(time.Minute), time.Minute)
	require.Len(t, c.parents, 1, "a parent past its age is dropped when another is added")
}

func TestKeptObjects(t *testing.T) {
	k := Key{Kind: "nodepools", ID: "a", ParentID: "c"}
	h := newHeldObjects()
	require.Nil(t, h.takeKept(k), "nothing kept")
	h.keep(k, &Object{Generation: 2, Parent: &Object{ID: "c"}, LastReport: &Report{}})
	got := h.takeKept(k)
	require.Equal(t, &Object{Generation: 2}, got, "kept without its parent and last report")
	got.Generation = 9
	require.Equal(t, int64(2), h.takeKept(k).Generation, "each reconcile gets its own copy")
	h.unkeep(k)
	require.Nil(t, h.takeKept(k), "an event, a poll or a wake lets go of it")
	h.keep(k, &Object{Generation: 2})
	h.forget(k)
	require.Nil(t, h.takeKept(k), "a removed resource")
}
