package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// appendResource must write the document present and encoding/json write, whatever the strings hold: the list
// (fast) and a get (present) of one resource must agree.
func TestAppendResourceMatchesPresent(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	deleted := now.Add(time.Hour)
	cluster := &resource.Descriptor{Kind: "Cluster", Plural: "clusters"}
	pool := &resource.Descriptor{Kind: "NodePool", Plural: "nodepools", Parent: cluster}
	stored := func(r resource.Resource) *resource.Resource {
		r.RawLabels = json.RawMessage(`{"env": "prod", "team": "a<b>&c"}`)
		r.Status.RawConditions = json.RawMessage(`[{"type": "Ready", "status": "True", "last_transition_time": "2026-11-30T12:00:00+00:00"}]`)
		return &r
	}
	tests := []struct {
		name string
		d    *resource.Descriptor
		r    *resource.Resource
	}{
		{"plain", cluster, stored(resource.Resource{ID: "01a2", Kind: "Cluster", Name: "prod", Spec: json.RawMessage(`{"a": [1, 2.5, "x"], "b": {}}`),
			Generation: 3, Version: 9, Status: resource.Status{Phase: conditions.PhaseReady}, CreatedTime: now, UpdatedTime: now,
			CreatedBy: "alice", UpdatedBy: "bob"})},
		{"deleting child", pool, stored(resource.Resource{ID: "01a3", Kind: "NodePool", Name: "workers", ParentID: "01a2",
			Spec: json.RawMessage(`{}`), Generation: 2, Version: 4, Status: resource.Status{Phase: conditions.PhaseDeleting},
			CreatedTime: now, UpdatedTime: now, CreatedBy: "alice", UpdatedBy: "alice", DeletedTime: &deleted, DeletedBy: "carol"})},
		{"identities that need escaping", cluster, stored(resource.Resource{ID: "01a4", Kind: "Cluster", Name: "odd",
			Spec: json.RawMessage(`{}`), Generation: 1, Version: 1, CreatedTime: now, UpdatedTime: now,
			CreatedBy: "système \"root\" <ops> & \\ \t\u2028", UpdatedBy: "\x01\u00e9"})},
		{"typed, as a write returns it", cluster, &resource.Resource{ID: "01a5", Kind: "Cluster", Name: "typed",
			Labels: map[string]string{"k": "v"}, Spec: json.RawMessage(`{}`), Generation: 1, Version: 2,
			Status: resource.Status{Phase: conditions.PhasePending, Conditions: []conditions.Condition{{Type: "Ready", Status: conditions.False,
				Reason: "AdaptersMissing", LastTransitionTime: now, LastUpdatedTime: now}}}, CreatedTime: now, UpdatedTime: now}},
		{"no labels, no conditions", cluster, &resource.Resource{ID: "01a6", Kind: "Cluster", Name: "bare", Spec: json.RawMessage(`{}`),
			CreatedTime: now, UpdatedTime: now}},
		{"listed with statuses=", cluster, stored(resource.Resource{ID: "01a7", Kind: "Cluster", Name: "reported", Spec: json.RawMessage(`{}`),
			CreatedTime: now, UpdatedTime: now, AdapterStatuses: []resource.AdapterStatus{{ResourceID: "01a7", Adapter: "applier",
				ObservedGeneration: 1, ObservedTime: now, Conditions: []conditions.Condition{{Type: "Available", Status: conditions.True}},
				Data: json.RawMessage(`{"k": "v"}`), Metadata: json.RawMessage(`{}`), CreatedTime: now, LastReportTime: now}}})},
		{"listed with statuses=, none reported", cluster, stored(resource.Resource{ID: "01a8", Kind: "Cluster", Name: "quiet",
			Spec: json.RawMessage(`{}`), CreatedTime: now, UpdatedTime: now, AdapterStatuses: []resource.AdapterStatus{}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &kindHandler{d: tt.d}
			fast, err := k.appendResource(nil, tt.r)
			require.NoError(t, err)
			require.True(t, json.Valid(fast), "%s", fast)
			item, err := k.present(tt.r, false)
			require.NoError(t, err)
			slow, err := json.Marshal(item)
			require.NoError(t, err)
			var a, b any
			require.NoError(t, json.Unmarshal(fast, &a))
			require.NoError(t, json.Unmarshal(slow, &b))
			require.Equal(t, b, a)
		})
	}
}

// FuzzAppendString checks the fast string path against encoding/json on any input.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b", "<&>", "é", "\x00", "\xff", "\u2028", "tab\there"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendString(nil, s)))
	})
}

// FuzzAppendCompact checks the blank-dropping copy against json.Compact on any valid JSON, in the form PostgreSQL
// writes jsonb and otherwise.
func FuzzAppendCompact(f *testing.F) {
	for _, s := range []string{`{"a": 1, "b": [1, 2, {"c": "x y"}]}`, `[]`, `{}`, `"a \" b"`, `{"k": "\\", "l": " , : "}`,
		"{\n  \"a\" :\t[ true , null ]\r\n}", `{"e": "\u00e9 \n"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, []byte(s)))
		require.Equal(t, want.String(), string(appendCompact(nil, []byte(s))))
	})
}
