package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWaitConditions(t *testing.T) {
	ready, err := decodeObject([]byte(`{"id": "7d4fbd4e-7c5c-4e43-a3c9-1e0d7b2a5a10", "kind": "Cluster", "href": "x", "name": "demo",
		"status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}, {"type": "Available", "status": "False", "reason": "Boom"}]}}`))
	require.NoError(t, err)
	tests := []struct {
		arg      string
		want     waitCondition
		ready    bool // met by ready
		gone     bool // met by a deleted resource
		describe string
	}{
		{"phase=Ready", waitCondition{phase: "Ready"}, true, false, "phase=Ready"},
		{"phase=ready", waitCondition{phase: "Ready"}, true, false, "phase=Ready"},
		{"phase=Degraded", waitCondition{phase: "Degraded"}, false, false, "phase=Degraded"},
		{"condition=Ready", waitCondition{condition: "Ready", status: "True"}, true, false, "condition Ready=True"},
		{"condition=Available", waitCondition{condition: "Available", status: "True"}, false, false, "condition Available=True"},
		{"condition=Available=false", waitCondition{condition: "Available", status: "False"}, true, false, "condition Available=False"},
		{"condition=Missing", waitCondition{condition: "Missing", status: "True"}, false, false, "condition Missing=True"},
		{"delete", waitCondition{deleted: true}, false, true, "deletion"},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			got, err := parseWaitFor(tc.arg)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.ready, got.met(ready))
			require.Equal(t, tc.gone, got.met(nil))
			require.Equal(t, tc.describe, got.String())
		})
	}
	require.Equal(t, "phase Ready; not True yet: Available (Boom)", describeState(ready))
	require.Equal(t, "gone", describeState(nil))
}
