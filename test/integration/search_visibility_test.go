package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/kinds"
	"github.com/hyperfleet/hyperfleet/internal/schema"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// A caller who may not see internal spec fields may not filter on them either: every internal path of every kind
// (read from the schema, so a new internal field is covered the day it is marked), and every path inside one, is
// refused on lists and on watches exactly as an unknown field is, while an admin's and an adapter's filters on
// them are served. Otherwise `spec.<internal> like 'a%'` recovers a hidden value a character at a time.
func TestSearchCannotNameHiddenFields(t *testing.T) {
	s, mint := startSecuredServer(t)
	doc, err := schema.Load(openapi.Document())
	require.NoError(t, err)
	set, err := kinds.Build(doc, api.Kinds(), nil)
	require.NoError(t, err)
	callers := map[string]string{
		"viewer":  mint("vera", []auth.Role{auth.RoleViewer}, ""),
		"user":    mint("ursula", []auth.Role{auth.RoleUser}, ""),
		"admin":   mint("ada", []auth.Role{auth.RoleAdmin}, ""),
		"adapter": mint("applier", []auth.Role{auth.RoleAdapter}, "applier"),
	}
	hidden := 0
	for _, d := range set.All {
		paths, ok := d.Spec.InternalPaths()
		require.True(t, ok, "%s: an internal field no fixed path reaches; walk it here too", d.Kind)
		for _, path := range paths {
			hidden++
			field := "spec." + strings.Join(path, ".")
			for _, expr := range []string{
				field + " like 'a%'",
				field + ".inner = 'x'",                         // inside it
				"name = 'n' or not (" + field + " is null)",    // anywhere in the expression
				"spec[" + strings.Join(path, "][") + "] = 'x'", // however spelled
			} {
				for _, watch := range []bool{false, true} {
					q := url.Values{"search": {expr}}
					if watch {
						q.Set("watch", "true")
					}
					target := "/" + d.Plural + "?" + q.Encode()
					for who, token := range callers {
						status, body := getAs(t, s, target, token)
						if who == "admin" || who == "adapter" {
							require.Equal(t, http.StatusOK, status, "%s %s: %s", who, target, body)
							continue
						}
						p := decodeProblem(t, status, body, http.StatusBadRequest)
						require.Equal(t, "HYPERFLEET-VAL-003", p.Code, "%s %s", who, target)
						require.Contains(t, deref(p.Detail), "unknown field", "%s %s: the same answer as a field that does not exist", who, target)
					}
				}
			}
		}
	}
	require.NotZero(t, hidden, "the schema marks no internal field: this test checks nothing")

	// The answer does not tell a hidden field from one that is not a search field at all.
	_, unknown := getAs(t, s, "/clusters?"+url.Values{"search": {"nosuch = 'x'"}}.Encode(), callers["viewer"])
	require.Contains(t, string(unknown), `unknown field \"nosuch\"`)
}

// getAs sends GET target (below the API base) with token and returns the status and, for a watch, the start of
// the stream (the request is cancelled once the head has been read).
func getAs(tb testing.TB, s *apiServer, target, token string) (int, []byte) {
	tb.Helper()
	ctx, cancel := context.WithCancel(ctxFor(tb))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/api/hyperfleet/v1"+target, http.NoBody)
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := s.http.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp.StatusCode, nil
	}
	body, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return resp.StatusCode, body
}

func decodeProblem(tb testing.TB, status int, body []byte, want int) api.Problem {
	tb.Helper()
	require.Equal(tb, want, status, "body: %s", body)
	var p api.Problem
	require.NoError(tb, json.Unmarshal(body, &p))
	return p
}
