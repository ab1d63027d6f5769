package integration

import (
	"net/http"
	"strings"
	"testing"
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
	} {
		f.Add(seed)
	}
	s := startServer(f)
	c := createCluster(f, s, "fuzzed", nil)
	np := createNodePool(f, s, c, "fuzzed", 1)
	targets := []struct{ method, path, contentType string }{
		{http.MethodPost, "/api/hyperfleet/v1/clusters", "application/json"},
		{http.MethodPatch, c.Href, "application/merge-patch+json"},
		{http.MethodPost, c.Href + "/nodepools", "application/json"},
		{http.MethodPatch, np.Href, "application/merge-patch+json"},
		{http.MethodPost, c.Href + "/statuses", "application/json"},
		{http.MethodPut, np.Href + "/statuses", "application/json"},
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
