package integration

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// seedFleet creates n clusters named c-00…, labelled env=prod for even i and dev for odd, tier=<i%3>.
func seedFleet(tb testing.TB, s *apiServer, n int) []*api.Cluster {
	tb.Helper()
	out := make([]*api.Cluster, n)
	for i := range n {
		env := "prod"
		if i%2 == 1 {
			env = "dev"
		}
		out[i] = createCluster(tb, s, fmt.Sprintf("c-%02d", i), map[string]string{"env": env, "tier": fmt.Sprint(i % 3)})
	}
	return out
}

func names(items []api.Cluster) []string {
	out := make([]string, len(items))
	for i, c := range items {
		out[i] = c.Name
	}
	return out
}

func TestListPagingOrderAndSearch(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	fleet := seedFleet(t, s, 25)
	// Make c-03 different in spec and generation.
	p, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, fleet[3].Id, nil,
		api.ResourcePatch{Spec: &map[string]interface{}{"hosted_cluster": map[string]any{"infrastructure_availability_policy": "HighlyAvailable"}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, p.StatusCode())

	t.Run("pages cover the fleet once in creation order", func(t *testing.T) {
		var seen []string
		for page := 1; page <= 3; page++ {
			resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Page: ptr(page), Size: ptr(10)})
			require.NoError(t, err)
			require.Equal(t, int64(25), deref(resp.JSON200.Total))
			require.Equal(t, page, resp.JSON200.Page)
			require.Equal(t, 10, resp.JSON200.Size)
			seen = append(seen, names(resp.JSON200.Items)...)
		}
		want := make([]string, 25)
		for i := range want {
			want[i] = fmt.Sprintf("c-%02d", i)
		}
		require.Equal(t, want, seen)
	})

	t.Run("order", func(t *testing.T) {
		resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Order: ptr("name desc"), Size: ptr(3)})
		require.NoError(t, err)
		require.Equal(t, []string{"c-24", "c-23", "c-22"}, names(resp.JSON200.Items))
		resp, err = s.ListClustersWithResponse(ctx, &api.ListClustersParams{Order: ptr("generation desc, name asc"), Size: ptr(2)})
		require.NoError(t, err)
		require.Equal(t, []string{"c-03", "c-00"}, names(resp.JSON200.Items))
	})

	searches := []struct {
		search string
		want   []string
	}{
		{"name = 'c-07'", []string{"c-07"}},
		{"name in ['c-01', 'c-02', 'nope']", []string{"c-01", "c-02"}},
		{"name like 'c-1%' and labels.env = 'prod'", []string{"c-10", "c-12", "c-14", "c-16", "c-18"}},
		{"labels.tier = '2' and labels.env != 'prod'", []string{"c-05", "c-11", "c-17", "c-23"}},
		{"generation > 1", []string{"c-03"}},
		{"spec.hosted_cluster.infrastructure_availability_policy = 'HighlyAvailable'", []string{"c-03"}},
		{"spec.hosted_cluster.dns.base_domain = 'example.com' and name >= 'c-23'", []string{"c-23", "c-24"}},
		{"status.phase = 'Pending' and name = 'c-00'", []string{"c-00"}},
		{"status.conditions.Ready = 'False' and name = 'c-01'", []string{"c-01"}},
		{"status.conditions.Ready = 'True'", []string{}},
		{"labels.missing = 'x'", []string{}},
		{`name = "x'; drop table clusters; --"`, []string{}},
		{"not (labels.env = 'prod') and labels.tier = '0'", []string{"c-03", "c-09", "c-15", "c-21"}},
	}
	for _, tc := range searches {
		t.Run("search "+tc.search, func(t *testing.T) {
			resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Search: ptr(tc.search), Size: ptr(100)})
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
			got := names(resp.JSON200.Items)
			sort.Strings(got)
			require.Equal(t, tc.want, got)
			require.Equal(t, int64(len(tc.want)), deref(resp.JSON200.Total))
		})
	}

	bad := []struct{ param, value, code string }{
		{"search", "name = ", "HYPERFLEET-VAL-003"},
		{"search", "colour = 'red'", "HYPERFLEET-VAL-003"},
		{"search", "name = 'a' or 1=1 --", "HYPERFLEET-VAL-003"},
		{"search", "generation = 'one'", "HYPERFLEET-VAL-003"},
		{"search", "created_time > 'yesterday'", "HYPERFLEET-VAL-003"},
		{"order", "name; drop table clusters", "HYPERFLEET-VAL-004"},
		{"order", "spec desc", "HYPERFLEET-VAL-004"},
		{"order", "name sideways", "HYPERFLEET-VAL-004"},
		{"size", "0", "HYPERFLEET-VAL-004"},
		{"size", "501", "HYPERFLEET-VAL-004"},
		{"page", "-1", "HYPERFLEET-VAL-004"},
		{"fields", "id,password", "HYPERFLEET-VAL-004"},
		{"include_deleted", "maybe", "HYPERFLEET-VAL-004"},
		{"count", "estimate", "HYPERFLEET-VAL-004"},
		{"count_estimate", "maybe", "HYPERFLEET-VAL-004"},
	}
	for _, tc := range bad {
		t.Run(tc.param+"="+tc.value, func(t *testing.T) {
			resp, err := s.http.Get(s.base + "/api/hyperfleet/v1/clusters?" + url.Values{tc.param: {tc.value}}.Encode())
			require.NoError(t, err)
			problem(t, resp, []byte(readAll(t, resp)), http.StatusBadRequest, tc.code)
		})
	}
	t.Run("count_estimate counts a small result", func(t *testing.T) {
		resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Page: ptr(2), Size: ptr(10), CountEstimate: ptr(true)})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
		require.Equal(t, int64(25), deref(resp.JSON200.Total))
		require.Nil(t, resp.JSON200.TotalEstimated, "below the threshold the total is a count, and says so by leaving the flag out")
	})
	t.Run("parse errors say where", func(t *testing.T) {
		resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Search: ptr("name = 'a' and and")})
		require.NoError(t, err)
		p := problem(t, resp.HTTPResponse, resp.Body, http.StatusBadRequest, "HYPERFLEET-VAL-003")
		require.Contains(t, *p.Detail, "position")
	})

	t.Run("fields returns only what was asked", func(t *testing.T) {
		resp, err := s.http.Get(s.base + "/api/hyperfleet/v1/clusters?size=1&fields=name,labels")
		require.NoError(t, err)
		body := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.Contains(t, body, `"name":"c-00"`)
		require.Contains(t, body, `"href":`)
		require.NotContains(t, body, `"spec"`)
		require.NotContains(t, body, `"created_time"`)
		require.Equal(t, "application/vnd.hyperfleet.sparse+json", resp.Header.Get("Content-Type"), "a sparse page is its own media type")

		typed, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Size: ptr(1), Fields: ptr("name,generation")})
		require.NoError(t, err)
		require.Nil(t, typed.JSON200, "a sparse page is not a page of full clusters")
		require.Len(t, typed.ApplicationvndHyperfleetSparseJSON200.Items, 1)
		item := typed.ApplicationvndHyperfleetSparseJSON200.Items[0]
		require.Equal(t, "c-00", deref(item.Name))
		require.Equal(t, int64(1), deref(item.Generation))
		require.Nil(t, item.Labels)
	})

	list, err := s.ListClustersWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, int64(25), deref(list.JSON200.Total), "injection attempts changed nothing")
}

// Keyset pages: following `next` visits every resource that exists throughout exactly once, in order, however
// many are created or deleted between pages, in any order's direction; count=false leaves total out.
func TestKeysetPagesSkipAndRepeatNothing(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	const n = 40
	for i := range n {
		createCluster(t, s, fmt.Sprintf("m%03d", i), nil)
	}
	for _, tt := range []struct {
		order string
		desc  bool
	}{{"name", false}, {"name desc", true}, {"created_time desc, name", true}} {
		run := len(tt.order) // tells the names this subtest creates from the others'
		t.Run(tt.order, func(t *testing.T) {
			seen := map[string]int{}
			var names []string
			var after *string
			for page := 0; ; page++ {
				resp, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Size: ptr(7), Order: ptr(tt.order), After: after,
					Search: ptr("name like 'm%' or name like 'a%' or name like 'z%'"), Count: ptr(false)})
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
				require.Nil(t, resp.JSON200.Total, "count=false leaves total out")
				for _, c := range resp.JSON200.Items {
					seen[c.Name]++
					names = append(names, c.Name)
				}
				// Between pages, names sort in before and after the cursor.
				createCluster(t, s, fmt.Sprintf("a%02d%03d", run, page), nil)
				createCluster(t, s, fmt.Sprintf("z%02d%03d", run, page), nil)
				if resp.JSON200.Next == nil {
					break
				}
				after = resp.JSON200.Next
				require.Less(t, page, 40, "the pages end")
			}
			for i := range n {
				require.Equal(t, 1, seen[fmt.Sprintf("m%03d", i)], "m%03d appears once", i)
			}
			for name, times := range seen {
				require.Equal(t, 1, times, "%s repeated", name)
			}
			require.True(t, sort.SliceIsSorted(names, func(i, j int) bool {
				if tt.desc {
					return names[i] > names[j]
				}
				return names[i] < names[j]
			}) || strings.HasPrefix(tt.order, "created_time"), "in order: %v", names)
		})
	}

	// A cursor is for the list it came from.
	first, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Size: ptr(2), Order: ptr("name")})
	require.NoError(t, err)
	require.NotNil(t, first.JSON200.Next)
	require.NotNil(t, first.JSON200.Total, "counted by default")
	for _, bad := range []api.ListClustersParams{
		{After: first.JSON200.Next, Order: ptr("generation")},
		{After: ptr("not-a-cursor")},
		{After: first.JSON200.Next, Order: ptr("name"), Page: ptr(2)},
		// A cursor of the right shape whose id was tampered with is refused before it reaches PostgreSQL.
		{After: ptr(base64.RawURLEncoding.EncodeToString([]byte(`{"o":"name, id","v":["a","not-a-uuid"]}`))), Order: ptr("name")},
	} {
		resp, err := s.ListClustersWithResponse(ctx, &bad)
		require.NoError(t, err)
		problem(t, resp.HTTPResponse, resp.Body, http.StatusBadRequest, "HYPERFLEET-VAL-004")
	}
}
