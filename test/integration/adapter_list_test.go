package integration

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// countingTransport counts the requests that go through it.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(req)
}

// A reconciler reads a fleet and two adapters' reports on it page by page: one request per page, whatever the
// number of clusters and adapters, every cluster once, in id order, each with the reports of the adapters that
// reported on it.
func TestAdapterListPagesWithReports(t *testing.T) {
	s := startServer(t) // "applier" is required: its placeholders must not read as reports
	fleet := seedFleet(t, s, 7)
	now := time.Now().UTC()
	data := map[string]any{"version": "4.16.2"}
	withData := report("checker", 1, now, available("True"))
	withData.Data = &data
	for i, c := range fleet {
		if i%2 == 0 {
			postClusterStatus(t, s, c, report("applier", 1, now, available("True")), http.StatusCreated)
		}
		if i%3 == 0 {
			postClusterStatus(t, s, c, withData, http.StatusCreated)
		}
	}
	counting := &countingTransport{base: s.transport}
	cfg := runtimeConfig(t, s, testAdapter)
	cfg.Transport = counting
	runner, err := adapter.New(cfg, testLogger())
	require.NoError(t, err)
	a := runner.API()
	ctx := ctxFor(t)

	var (
		seen  []adapter.Listed
		pages int
		after string
	)
	for {
		page, err := a.List(ctx, adapter.Clusters(), "", adapter.ListQuery{Size: 3, After: after, Statuses: []string{"applier", "checker"},
			Search: "labels.tier in ['0','1','2']"})
		require.NoError(t, err)
		pages++
		seen = append(seen, page.Items...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	require.Equal(t, 3, pages)
	require.EqualValues(t, pages, counting.n.Load(), "one request per page")
	require.Len(t, seen, len(fleet))
	byName := map[string]adapter.Listed{}
	for i, it := range seen {
		if i > 0 {
			require.Less(t, seen[i-1].ID, it.ID, "id order")
		}
		byName[it.Name] = it
	}
	for i, c := range fleet {
		it := byName[c.Name]
		require.Equal(t, c.Id.String(), it.ID)
		require.Equal(t, map[string]string(c.Labels), it.Labels)
		require.EqualValues(t, 1, it.Generation)
		require.False(t, it.Deleting)
		require.NotEmpty(t, it.Conditions)
		var spec map[string]any
		require.NoError(t, json.Unmarshal(it.Spec, &spec))
		require.Equal(t, defaultStream, spec["version_stream"])
		require.NotNil(t, it.Reports, c.Name)
		require.Equal(t, i%2 == 0, it.Reports["applier"] != nil, "%s applier", c.Name)
		require.Equal(t, i%3 == 0, it.Reports["checker"] != nil, "%s checker", c.Name)
		if r := it.Reports["checker"]; r != nil {
			require.EqualValues(t, 1, r.ObservedGeneration)
			require.Equal(t, "4.16.2", r.Data["version"])
			require.NotNil(t, r.Condition("Available"))
		}
	}

	// Without Statuses, no reports; a bad adapter name is the API's 400.
	page, err := a.List(ctx, adapter.Clusters(), "", adapter.ListQuery{Size: 1})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Nil(t, page.Items[0].Reports)
	_, err = a.List(ctx, adapter.Clusters(), "", adapter.ListQuery{Statuses: []string{"Not_A_Name"}})
	var apiErr *adapter.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.Status)
	require.Equal(t, "HYPERFLEET-VAL-004", apiErr.Code)

	// A child kind under its parent.
	np := createNodePool(t, s, fleet[0], "pool", 1)
	page, err = a.List(ctx, adapter.NodePools(), fleet[0].Id.String(), adapter.ListQuery{Statuses: []string{"applier"}})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, np.Id.String(), page.Items[0].ID)
	require.Equal(t, fleet[0].Id.String(), page.Items[0].ParentID)
	require.Empty(t, page.Items[0].Reports)
}
