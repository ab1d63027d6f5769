package conditions

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkValidateReport measures the rules every status write checks before touching the database: a typical
// report with five conditions and a little data.
func BenchmarkValidateReport(b *testing.B) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rep := Report{Adapter: "version-resolver", ObservedGeneration: 3, ObservedTime: now.Add(-time.Second),
		Conditions: []Reported{
			{Type: Available, Status: True, Reason: "Resolved", Message: "stable-4.16/amd64 resolves to 4.16.3"},
			{Type: Applied, Status: True, Reason: ReasonReconciled}, {Type: Health, Status: True, Reason: ReasonReconciled},
			{Type: "ImageResolved", Status: True, Reason: "Resolved", Message: "4.16.3 is quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"},
			{Type: "ResolvedVersionInGraph", Status: True, Reason: "InGraph"},
		},
		Data:     json.RawMessage(`{"release_image":"quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64","resolved_version":"4.16.3","channel":"stable-4.16","arch":"amd64","resolved_time":"2026-11-30T11:00:00Z"}`),
		Metadata: json.RawMessage(`{"replica":"resolver-0","shard_index":0,"shard_count":1}`),
	}
	b.ReportAllocs()
	for b.Loop() {
		if p := rep.Validate(now); p != nil {
			b.Fatal(p)
		}
	}
}
