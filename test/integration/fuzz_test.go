package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// FuzzBodiesNeverCauseA500 throws arbitrary bodies at every write endpoint of a real server: bad input must
// always be a 4xx, never a 500. `go test` runs the seeds; `go test -fuzz FuzzBodies ./test/integration` explores.
func FuzzBodiesNeverCauseA500(f *testing.F) {
	for _, seed := range []string{
		`{"name":"abc","spec":{"version_stream":"stable-4-16"}}`,
		`{"name":"abc","spec":{"version_stream":"stable-4-16","hosted_cluster":{"services":[{"service":"APIServer","type":"Route"}]}}}`,
		`{"spec":{"hosted_cluster":{"networking":{"cluster_network":[{"cidr":"10.0.0.0/8","host_prefix":1e400}]}}}}`,
		`{"labels":{"a":null,"b":"c"},"spec":{"replicas":-1}}`,
		`{"adapter":"a","observed_generation":9223372036854775807,"observed_time":"2026-01-01T00:00:00Z","conditions":[]}`,
		`{"adapter":"a","observed_generation":1,"observed_time":"not a time","conditions":[{"type":"Available","status":"True"}]}`,
		`{"spec":[[[[[[[[[[[]]]]]]]]]]]}`, `null`, `[]`, `"x"`, `{"name":"\u0000"}`, `{"spec":{"version_stream":"\ud800"}}`,
		// Values Go accepts and PostgreSQL's jsonb refuses (NUL, unpaired surrogates, invalid UTF-8, numbers beyond
		// numeric), in every place a write stores JSON.
		`{"name":"abc","labels":{"a":"\u0000"},"spec":{"version_stream":"stable-4-16"}}`,
		`{"labels":{"\udc00":"x"}}`, "{\"labels\":{\"x\":\"\xed\xa0\x80\"}}",
		`{"spec":{"hosted_cluster":{"dns":{"base_domain":"a\u0000b"}}}}`,
		`{"spec":{"replicas":1,"platform":{"hivelocity":{"device_type":"s","region":"r","selector":{"\u0000":"x"},"userdata":"\ud83d"}}}}`,
		`{"name":"abc","spec":{"target_version":"4.16","windows":[{"days":["Monday"],"start":"01:00","duration":"1h"}],"timezone":"\u0000"}}`,
		`{"spec":{"replicas":1e-100000}}`, `{"spec":{"replicas":1` + strings.Repeat("0", 20000) + `}}`,
	} {
		f.Add(seed)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	for _, extra := range []string{
		`"data":{"x":"\u0000"}`, `"metadata":{"\u0000":1}`, `"data":{"x":1e-100000}`, `"data":{"x":0.` + strings.Repeat("9", 17000) + `}`,
		`"data":{"x":1` + strings.Repeat("0", 20000) + `}`, "\"data\":{\"x\":\"\xff\"}",
	} {
		f.Add(`{"adapter":"applier","observed_generation":1,"observed_time":"` + now + `","conditions":[{"type":"Available","status":"True","message":"\ud800"}],` + extra + `}`)
		f.Add(`{"adapter":"applier","observed_generation":1,"observed_time":"` + now + `","conditions":[{"type":"Available","status":"True"}],` + extra + `}`)
	}
	s := startServerWith(f, map[string][]string{"cluster": {"applier"}, "nodepool": {"applier"}, "versionstream": {"applier"}})
	c := createCluster(f, s, "fuzzed", nil)
	np := createNodePool(f, s, c, "fuzzed", 1)
	vs := streamNamed(f, s, defaultStream)
	sched, err := s.CreateUpgradeScheduleWithResponse(ctxFor(f), nil, api.UpgradeScheduleCreate{Name: "fuzzed", Spec: api.UpgradeScheduleSpec{}})
	if err != nil || sched.JSON201 == nil {
		f.Fatalf("create schedule: %v", err)
	}
	// Every write endpoint of every kind.
	targets := []struct{ method, path, contentType string }{
		{http.MethodPost, "/api/hyperfleet/v1/clusters", "application/json"},
		{http.MethodPatch, c.Href, "application/merge-patch+json"},
		{http.MethodPost, c.Href + "/statuses", "application/json"},
		{http.MethodPost, c.Href + "/nodepools", "application/json"},
		{http.MethodPatch, np.Href, "application/merge-patch+json"},
		{http.MethodPut, np.Href + "/statuses", "application/json"},
		{http.MethodPost, "/api/hyperfleet/v1/versionstreams", "application/json"},
		{http.MethodPatch, vs.Href, "application/merge-patch+json"},
		{http.MethodPut, vs.Href + "/statuses", "application/json"},
		{http.MethodPost, "/api/hyperfleet/v1/upgradeschedules", "application/json"},
		{http.MethodPatch, sched.JSON201.Href, "application/merge-patch+json"},
		{http.MethodPost, sched.JSON201.Href + "/statuses", "application/json"},
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, tgt := range targets {
			req, err := http.NewRequest(tgt.method, s.base+tgt.path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tgt.contentType)
			resp, err := s.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer := readAll(t, resp)
			if resp.StatusCode >= 500 {
				t.Fatalf("%s %s with %q: %d %s", tgt.method, tgt.path, body, resp.StatusCode, answer)
			}
		}
	})
}
