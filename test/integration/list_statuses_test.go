package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// adaptersOf returns, by cluster name, the adapters whose reports a listed cluster carries (nil: the item has no
// adapter_statuses at all).
func adaptersOf(items []api.Cluster) map[string][]string {
	out := map[string][]string{}
	for _, c := range items {
		if c.AdapterStatuses == nil {
			out[c.Name] = nil
			continue
		}
		names := []string{}
		for _, st := range *c.AdapterStatuses {
			names = append(names, st.Adapter)
		}
		out[c.Name] = names
	}
	return out
}

// A list with statuses= carries the named adapters' reports in each item, as GET …/statuses shows them: only
// adapters that reported (never the required adapter's placeholder, never an adapter not named), on every way
// through a list (first page, after a cursor, a numbered page, a sparse page, a child kind).
func TestListEmbedsAdapterStatuses(t *testing.T) {
	s := startServer(t) // "applier" is required: every cluster has its placeholder
	ctx := ctxFor(t)
	fleet := seedFleet(t, s, 5)
	now := time.Now().UTC()
	postClusterStatus(t, s, fleet[0], report("applier", 1, now, available("True")), http.StatusCreated)
	data := map[string]any{"release_image": "quay.io/x@sha256:1"}
	withData := report("checker", 1, now, available("False"), cond("Degraded", "True", "Broken"))
	withData.Data = &data
	postClusterStatus(t, s, fleet[0], withData, http.StatusCreated)
	postClusterStatus(t, s, fleet[1], report("applier", 1, now, available("True")), http.StatusCreated)
	postClusterStatus(t, s, fleet[2], report("other", 1, now, available("True")), http.StatusCreated)

	want := map[string][]string{
		"c-00": {"applier", "checker"}, "c-01": {"applier"}, "c-02": {}, "c-03": {}, "c-04": {},
	}
	statuses := "checker, applier,applier" // spaces and repeats are tolerated

	t.Run("one page", func(t *testing.T) {
		resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Statuses: &statuses})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		require.Equal(t, want, adaptersOf(resp.JSON200.Items))

		// The embedded report is the one GET …/statuses serves.
		got := *resp.JSON200.Items[0].AdapterStatuses
		one, err := s.ListClusterStatusesWithResponse(ctx, fleet[0].Id)
		require.NoError(t, err)
		var checker api.AdapterStatus
		for _, st := range one.JSON200.Items {
			if st.Adapter == "checker" {
				checker = st
			}
		}
		require.Equal(t, checker, got[1])
		require.Equal(t, "quay.io/x@sha256:1", got[1].Data["release_image"])
		require.Len(t, got[1].Conditions, 2)
	})

	t.Run("after a cursor and by page number", func(t *testing.T) {
		seen := map[string][]string{}
		var after *string
		for {
			resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Statuses: &statuses, Size: ptr(2), After: after, Count: ptr(false)})
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
			for k, v := range adaptersOf(resp.JSON200.Items) {
				seen[k] = v
			}
			if resp.JSON200.Next == nil {
				break
			}
			after = resp.JSON200.Next
		}
		require.Equal(t, want, seen)

		resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Statuses: ptr("applier"), Size: ptr(2), Page: ptr(1)})
		require.NoError(t, err)
		require.Equal(t, map[string][]string{"c-00": {"applier"}, "c-01": {"applier"}}, adaptersOf(resp.JSON200.Items))
		resp, err = s.ListClustersWithResponse(ctx, &api.ListClustersParams{Statuses: ptr("applier"), Size: ptr(2), Page: ptr(2)})
		require.NoError(t, err)
		require.Equal(t, map[string][]string{"c-02": {}, "c-03": {}}, adaptersOf(resp.JSON200.Items))
	})

	t.Run("absent without statuses", func(t *testing.T) {
		resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{})
		require.NoError(t, err)
		for _, c := range resp.JSON200.Items {
			require.Nil(t, c.AdapterStatuses, c.Name)
		}
		raw, err := s.http.Get(s.base + api.BasePath + "/clusters?fields=name")
		require.NoError(t, err)
		body, err := io.ReadAll(raw.Body)
		require.NoError(t, err)
		require.NoError(t, raw.Body.Close())
		require.NotContains(t, string(body), "adapter_statuses")
	})

	t.Run("sparse page whatever fields names", func(t *testing.T) {
		resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Statuses: ptr("checker"), Fields: ptr("name"), Search: ptr("name in ['c-00','c-01']")})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		items := resp.ApplicationvndHyperfleetSparseJSON200.Items
		require.Len(t, items, 2)
		for _, it := range items {
			require.NotNil(t, it.AdapterStatuses, deref(it.Name))
			require.Nil(t, it.Spec)
			if deref(it.Name) == "c-00" {
				require.Len(t, *it.AdapterStatuses, 1)
				require.Equal(t, "checker", (*it.AdapterStatuses)[0].Adapter)
			} else {
				require.Empty(t, *it.AdapterStatuses)
			}
		}
	})

	t.Run("a child kind", func(t *testing.T) {
		np := createNodePool(t, s, fleet[0], "pool", 1)
		postNodePoolStatus(t, s, np, report("applier", 1, now, available("True")), http.StatusCreated)
		resp, err := s.ListClusterNodePoolsWithResponse(ctx, fleet[0].Id, &api.ListClusterNodePoolsParams{Statuses: ptr("applier")})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		require.Len(t, resp.JSON200.Items, 1)
		require.Len(t, deref(resp.JSON200.Items[0].AdapterStatuses), 1)
	})
}

func TestListStatusesRefused(t *testing.T) {
	s := startServer(t)
	nine := make([]string, 9)
	for i := range nine {
		nine[i] = fmt.Sprintf("a%d", i)
	}
	for _, tt := range []struct{ name, query string }{
		{"not an adapter name", "statuses=Applier"},
		{"not a DNS label", "statuses=applier,a_b"},
		{"too long", "statuses=" + strings.Repeat("a", 64)},
		{"too many", "statuses=" + strings.Join(nine, ",")},
		{"empty", "statuses="},
		{"only commas", "statuses=,,"},
		{"with a watch", "statuses=applier&watch=true"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			require.NoError(t, err)
			resp, err := s.http.Get(s.base + api.BasePath + "/clusters?" + q.Encode())
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			p := problem(t, resp, body, http.StatusBadRequest, "HYPERFLEET-VAL-004")
			require.NotEmpty(t, p.Errors)
			require.Equal(t, "statuses", (*p.Errors)[0].Field)
		})
	}
	// Eight distinct names are the most, whatever the repeats.
	resp, err := s.ListClustersWithResponse(ctxFor(t), &api.ListClustersParams{Statuses: ptr(strings.Join(nine[:8], ",") + "," + nine[0])})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
}

// Whoever may list a kind may read the reports embedded in it, as GET …/statuses lets every reader read them: a
// viewer's list (whose specs lose their internal fields in the database) carries the same reports as an admin's.
func TestListStatusesAsAViewer(t *testing.T) {
	s, mint := startSecuredServer(t)
	ctx := ctxFor(t)
	admin := bearer(mint("root", []auth.Role{auth.RoleAdmin}, ""))
	created, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "seen", Spec: clusterSpec(defaultStream)}, admin)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), "body: %s", created.Body)
	rep, err := s.PostClusterStatusWithResponse(ctx, created.JSON201.Id, report("applier", 1, time.Now().UTC(), available("True")),
		bearer(mint("svc", []auth.Role{auth.RoleAdapter}, "applier")))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, rep.StatusCode(), "body: %s", rep.Body)

	for _, as := range []api.RequestEditorFn{admin, bearer(mint("vera", []auth.Role{auth.RoleViewer}, ""))} {
		resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Statuses: ptr("applier")}, as)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		require.Equal(t, map[string][]string{"seen": {"applier"}}, adaptersOf(resp.JSON200.Items))
	}
}
