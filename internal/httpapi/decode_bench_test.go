package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// statusReportBody is a typical adapter report: the runtime's conditions, an adapter condition and a little data.
const statusReportBody = `{"adapter":"version-resolver","observed_generation":3,"observed_time":"2026-11-30T12:00:00Z",
"conditions":[{"type":"Available","status":"True","reason":"Resolved","message":"stable-4.16/amd64 resolves to 4.16.3"},
{"type":"Applied","status":"True","reason":"Reconciled"},{"type":"Health","status":"True","reason":"Reconciled"},
{"type":"ImageResolved","status":"True","reason":"Resolved","message":"stable-4.16/amd64: 4.16.3 is quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"},
{"type":"ResolvedVersionInGraph","status":"True","reason":"InGraph"}],
"data":{"release_image":"quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64","resolved_version":"4.16.3","channel":"stable-4.16","arch":"amd64","resolved_time":"2026-11-30T11:00:00Z"},
"metadata":{"replica":"resolver-0","shard_index":0,"shard_count":1}}`

// BenchmarkDecodeStatusReport compares decoding a status write's body into the hand-written wire struct (data and
// metadata kept as raw JSON for storage) with the generated type (data and metadata decoded into maps, which
// storage must encode again). The status write is the API's hottest write path.
func BenchmarkDecodeStatusReport(b *testing.B) {
	body := []byte(strings.ReplaceAll(statusReportBody, "\n", ""))
	b.Run("wire struct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r reportBody
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What a status write really runs: the wire struct plus the checks (media type, what jsonb refuses, repeated
	// and case-folded member names).
	b.Run("decodeStrict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r reportBody
			req := httptest.NewRequest(http.MethodPut, "/statuses", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if err := decodeStrict(req, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same, in one pass (decodeReport): what a status write runs now.
	b.Run("decodeReport", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r reportBody
			req := httptest.NewRequest(http.MethodPut, "/statuses", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if err := decodeReport(req, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated type", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r api.AdapterStatusReport
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&r); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(r.Data); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(r.Metadata); err != nil {
				b.Fatal(err)
			}
		}
	})
}
