package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// cond builds a reported condition; reason may be empty.
func cond(typ, status, reason string) api.ReportedCondition {
	c := api.ReportedCondition{Type: typ, Status: api.ReportedConditionStatus(status)}
	if reason != "" {
		c.Reason = &reason
	}
	return c
}

func report(adapter string, generation int64, at time.Time, conds ...api.ReportedCondition) api.AdapterStatusReport {
	return api.AdapterStatusReport{Adapter: adapter, ObservedGeneration: generation, ObservedTime: at, Conditions: conds}
}

func available(status string) api.ReportedCondition { return cond("Available", status, "") }

// postClusterStatus posts and expects want; it returns the response.
func postClusterStatus(tb testing.TB, s *apiServer, c *api.Cluster, rep api.AdapterStatusReport, want int) *api.PostClusterStatusResponse {
	tb.Helper()
	resp, err := s.PostClusterStatusWithResponse(ctxFor(tb), c.Id, rep)
	require.NoError(tb, err)
	require.Equal(tb, want, resp.StatusCode(), "body: %s", resp.Body)
	return resp
}

func postNodePoolStatus(tb testing.TB, s *apiServer, np *api.NodePool, rep api.AdapterStatusReport, want int) {
	tb.Helper()
	resp, err := s.PostNodePoolStatusWithResponse(ctxFor(tb), np.OwnerReferences.Id, np.Id, rep)
	require.NoError(tb, err)
	require.Equal(tb, want, resp.StatusCode(), "body: %s", resp.Body)
}

func getCluster(tb testing.TB, s *apiServer, c *api.Cluster) *api.Cluster {
	tb.Helper()
	resp, err := s.GetClusterWithResponse(ctxFor(tb), c.Id)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON200
}

// conditionOf returns the aggregated condition of that type, failing if absent.
func conditionOf(tb testing.TB, c *api.Cluster, typ string) api.Condition {
	tb.Helper()
	for _, x := range c.Status.Conditions {
		if x.Type == typ {
			return x
		}
	}
	require.Failf(tb, "no condition", "%s has no %s condition: %+v", c.Name, typ, c.Status.Conditions)
	return api.Condition{}
}

func pendingNames(tb testing.TB, s *apiServer, adapter, resync string) []string {
	tb.Helper()
	params := &api.ListClustersParams{PendingFor: &adapter, Size: ptr(500), IncludeDeleted: ptr(true), Order: ptr("name")}
	if resync != "" {
		params.ResyncAfter = &resync
	}
	resp, err := s.ListClustersWithResponse(ctxFor(tb), params)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return names(resp.JSON200.Items)
}
