package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/eventrelay"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// tenancyClaim is the token claim that names the caller's tenant in these tests.
const tenancyClaim = "org_id"

// tenancyEnv is a server with tenancy on and tokens for its callers: a user of tenant A, one of tenant B, the
// adapter "applier" and an admin (the last two see every tenant).
type tenancyEnv struct {
	s                  *apiServer
	userA, userB       string
	adapter, admin     string
	mint               func(subject string, roles []auth.Role, adapter string, claims map[string]any) string
	tenantA, tenantB   string
	clusterA, clusterB *api.Cluster // each tenant's cluster "same", of the same name
	poolA, poolB       *api.NodePool
	onlyA              *api.Cluster // a cluster whose name only A has
}

// tenancyStart serves with JWT, roles and tenancy on (the tenant from claim org_id); extra adjusts the config.
func tenancyStart(tb testing.TB, extra ...func(*server.Config)) *tenancyEnv {
	tb.Helper()
	issuer, err := auth.LoadOrCreateDevIssuer(tb.TempDir())
	require.NoError(tb, err)
	cfg := server.Config{
		RequiredAdapters: map[string][]string{"cluster": {"applier"}, "nodepool": {"applier"}},
		EnableJWT:        true, EnableAuthz: true,
		JWT: auth.VerifierConfig{JWKSFile: issuer.JWKSPath(), Issuer: testIssuer, Audience: testAudience, TenantClaim: tenancyClaim},
	}
	for _, f := range extra {
		f(&cfg)
	}
	mint := func(subject string, roles []auth.Role, adapter string, claims map[string]any) string {
		token, err := issuer.Mint(subject, roles, adapter, time.Hour, testIssuer, testAudience, claims)
		require.NoError(tb, err)
		return token
	}
	return &tenancyEnv{
		s:       startServerOn(tb, harness.NewDatabase(tb), cfg),
		mint:    mint,
		tenantA: "org-a", tenantB: "org-b",
		userA:   mint("alice", []auth.Role{auth.RoleUser}, "", map[string]any{tenancyClaim: "org-a"}),
		userB:   mint("bob", []auth.Role{auth.RoleUser}, "", map[string]any{tenancyClaim: "org-b"}),
		adapter: mint("applier", []auth.Role{auth.RoleAdapter}, "applier", nil),
		admin:   mint("root", []auth.Role{auth.RoleAdmin}, "", nil),
	}
}

// seed gives each tenant a cluster "same" with a node pool "pool" and the applier's report on both, and A a
// cluster "only-a".
func (e *tenancyEnv) seed(tb testing.TB) {
	tb.Helper()
	e.clusterA = tenancyCreateCluster(tb, e.s, e.userA, "same")
	e.clusterB = tenancyCreateCluster(tb, e.s, e.userB, "same")
	e.onlyA = tenancyCreateCluster(tb, e.s, e.userA, "only-a")
	e.poolA = tenancyCreatePool(tb, e.s, e.userA, e.clusterA, "pool")
	e.poolB = tenancyCreatePool(tb, e.s, e.userB, e.clusterB, "pool")
	for _, c := range []*api.Cluster{e.clusterA, e.clusterB} {
		resp, err := e.s.PostClusterStatusWithResponse(ctxFor(tb), c.Id, report("applier", 1, time.Now().UTC(), available("True")), bearer(e.adapter))
		require.NoError(tb, err)
		require.Equal(tb, http.StatusCreated, resp.StatusCode(), "the adapter reports on every tenant's clusters: %s", resp.Body)
	}
	for _, np := range []*api.NodePool{e.poolA, e.poolB} {
		resp, err := e.s.PostNodePoolStatusWithResponse(ctxFor(tb), np.OwnerReferences.Id, np.Id, report("applier", 1, time.Now().UTC(), available("True")), bearer(e.adapter))
		require.NoError(tb, err)
		require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	}
}

func tenancyCreateCluster(tb testing.TB, s *apiServer, token, name string) *api.Cluster {
	tb.Helper()
	resp, err := s.CreateClusterWithResponse(ctxFor(tb), nil, api.ClusterCreate{Name: name, Spec: clusterSpec(defaultStream)}, bearer(token))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}

func tenancyCreatePool(tb testing.TB, s *apiServer, token string, c *api.Cluster, name string) *api.NodePool {
	tb.Helper()
	resp, err := s.CreateNodePoolWithResponse(ctxFor(tb), c.Id, nil, api.NodePoolCreate{Name: name, Spec: nodePoolSpec(1)}, bearer(token))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON201
}

// tenancyDo sends one request as token and returns the status and body.
func tenancyDo(tb testing.TB, s *apiServer, token, method, path, contentType, body string) (int, []byte) {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctxFor(tb), method, s.base+"/api/hyperfleet/v1"+path, strings.NewReader(body))
	require.NoError(tb, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.http.Do(req)
	require.NoError(tb, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return resp.StatusCode, b
}

// tenancyProblemShape is a problem body without what differs between any two answers (its request id), with the
// ids in it replaced by their place in ids, so that answers about different ids compare.
func tenancyProblemShape(tb testing.TB, body []byte, ids ...string) string {
	tb.Helper()
	var doc map[string]any
	require.NoError(tb, json.Unmarshal(body, &doc), "a problem body: %s", body)
	delete(doc, "request_id")
	b, err := json.Marshal(doc)
	require.NoError(tb, err)
	shape := string(b)
	for i, id := range ids {
		shape = strings.ReplaceAll(shape, id, fmt.Sprintf("{id%d}", i))
	}
	return shape
}

// Crossing tenants is indistinguishable from a missing id: on every route of every tenanted kind that names a
// resource, a user of B asking about A's resource gets exactly the answer (status, code, shape) that a random id
// gets, and A's resources are untouched afterwards.
func TestTenancyCrossingTenantsIsNotFound(t *testing.T) {
	e := tenancyStart(t)
	e.seed(t)
	const merge, jsonType = "application/merge-patch+json", "application/json"
	reportBody := func() string {
		b, err := json.Marshal(report("applier", 1, time.Now().UTC(), available("False")))
		require.NoError(t, err)
		return string(b)
	}
	poolBody, err := json.Marshal(api.NodePoolCreate{Name: "intruder", Spec: nodePoolSpec(1)})
	require.NoError(t, err)
	cA, npA, cB := e.clusterA.Id.String(), e.poolA.Id.String(), e.clusterB.Id.String()

	routes := []struct {
		name, method, path, contentType string
		body                            func() string
		ids                             []string // A's ids that fill path's %[n]s; random ones replace them for the missing case
		want                            int
	}{
		{"get cluster", http.MethodGet, "/clusters/%[1]s", "", nil, []string{cA}, http.StatusNotFound},
		{"patch cluster", http.MethodPatch, "/clusters/%[1]s", merge, func() string { return `{"labels": {"owner": "b"}}` }, []string{cA}, http.StatusNotFound},
		{"delete cluster", http.MethodDelete, "/clusters/%[1]s", "", nil, []string{cA}, http.StatusNotFound},
		{"get cluster statuses", http.MethodGet, "/clusters/%[1]s/statuses", "", nil, []string{cA}, http.StatusNotFound},
		// Reporting is the adapters' (who see every tenant): a user is refused whatever the id.
		{"post cluster status", http.MethodPost, "/clusters/%[1]s/statuses", jsonType, reportBody, []string{cA}, http.StatusForbidden},
		{"force-delete cluster", http.MethodPost, "/clusters/%[1]s/force-delete", "", nil, []string{cA}, http.StatusForbidden},
		{"list node pools of a cluster", http.MethodGet, "/clusters/%[1]s/nodepools", "", nil, []string{cA}, http.StatusNotFound},
		{"create a node pool in a cluster", http.MethodPost, "/clusters/%[1]s/nodepools", jsonType, func() string { return string(poolBody) }, []string{cA}, http.StatusNotFound},
		{"get node pool", http.MethodGet, "/clusters/%[1]s/nodepools/%[2]s", "", nil, []string{cA, npA}, http.StatusNotFound},
		{"get node pool under an own cluster", http.MethodGet, "/clusters/" + cB + "/nodepools/%[1]s", "", nil, []string{npA}, http.StatusNotFound},
		{"patch node pool", http.MethodPatch, "/clusters/%[1]s/nodepools/%[2]s", merge, func() string { return `{"labels": {"owner": "b"}}` }, []string{cA, npA}, http.StatusNotFound},
		{"delete node pool", http.MethodDelete, "/clusters/%[1]s/nodepools/%[2]s", "", nil, []string{cA, npA}, http.StatusNotFound},
		{"get node pool statuses", http.MethodGet, "/clusters/%[1]s/nodepools/%[2]s/statuses", "", nil, []string{cA, npA}, http.StatusNotFound},
		{"post node pool status", http.MethodPost, "/clusters/%[1]s/nodepools/%[2]s/statuses", jsonType, reportBody, []string{cA, npA}, http.StatusForbidden},
		{"force-delete node pool", http.MethodPost, "/clusters/%[1]s/nodepools/%[2]s/force-delete", "", nil, []string{cA, npA}, http.StatusForbidden},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			body := ""
			if r.body != nil {
				body = r.body()
			}
			fill := func(ids []string) string {
				args := make([]any, len(ids))
				for i, id := range ids {
					args[i] = id
				}
				return fmt.Sprintf(r.path, args...)
			}
			missing := make([]string, len(r.ids))
			for i := range missing {
				missing[i] = uuid.NewString()
			}
			crossStatus, crossBody := tenancyDo(t, e.s, e.userB, r.method, fill(r.ids), r.contentType, body)
			missStatus, missBody := tenancyDo(t, e.s, e.userB, r.method, fill(missing), r.contentType, body)
			require.Equal(t, r.want, crossStatus, "another tenant's: %s", crossBody)
			require.Equal(t, missStatus, crossStatus, "a missing id's: %s", missBody)
			require.Equal(t, tenancyProblemShape(t, missBody, missing...), tenancyProblemShape(t, crossBody, r.ids...))
			if r.want == http.StatusNotFound {
				require.Contains(t, string(crossBody), string(tenancyNotFoundCode))
			}
		})
	}

	// Nothing B tried reached A's resources.
	for _, token := range []string{e.userA, e.admin} {
		c, err := e.s.GetClusterWithResponse(ctxFor(t), e.clusterA.Id, bearer(token))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, c.StatusCode(), "body: %s", c.Body)
		require.Equal(t, e.clusterA.Generation, c.JSON200.Generation)
		require.Nil(t, c.JSON200.DeletedTime, "A's cluster is not being deleted")
		require.NotContains(t, string(c.Body), `"owner"`)
		pools, err := e.s.ListClusterNodePoolsWithResponse(ctxFor(t), e.clusterA.Id, nil, bearer(token))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, pools.StatusCode(), "body: %s", pools.Body)
		require.Equal(t, []string{"pool"}, tenancyNames(t, pools.Body), "no intruder among A's node pools")
	}
}

// tenancyNotFoundCode is the code every crossing (and every missing id) gets.
const tenancyNotFoundCode = "HYPERFLEET-NTF-001"

// tenancyNames returns the names of a list's items, sorted.
func tenancyNames(tb testing.TB, body []byte) []string {
	tb.Helper()
	var list struct {
		Items []struct {
			Name   string `json:"name"`
			Tenant string `json:"tenant"`
		} `json:"items"`
	}
	require.NoError(tb, json.Unmarshal(body, &list), "a list: %s", body)
	names := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		names = append(names, it.Name)
	}
	slices.Sort(names)
	return names
}

// Lists, searches and the flat node pool list show a user only their tenant's resources; the same name lives in
// both tenants; admins and adapters see both; the global kinds are everyone's.
func TestTenancyListsShowOnlyTheCallersTenant(t *testing.T) {
	e := tenancyStart(t)
	e.seed(t)
	search := func(expr string) string { return "search=" + url.QueryEscape(expr) }
	tests := []struct {
		name, path string
		want       map[string][]string // caller → names
	}{
		{"clusters", "/clusters", map[string][]string{
			"A": {"only-a", "same"}, "B": {"same"}, "admin": {"only-a", "same", "same"}, "adapter": {"only-a", "same", "same"}}},
		{"search by a name only A has", "/clusters?" + search("name = 'only-a'"), map[string][]string{
			"A": {"only-a"}, "B": {}, "admin": {"only-a"}, "adapter": {"only-a"}}},
		{"search by a name both have", "/clusters?" + search("name = 'same'"), map[string][]string{
			"A": {"same"}, "B": {"same"}, "admin": {"same", "same"}, "adapter": {"same", "same"}}},
		{"search by A's id", "/clusters?" + search("id = '"+e.onlyA.Id.String()+"'"), map[string][]string{
			"A": {"only-a"}, "B": {}, "admin": {"only-a"}}},
		{"with statuses", "/clusters?statuses=applier", map[string][]string{
			"A": {"only-a", "same"}, "B": {"same"}, "admin": {"only-a", "same", "same"}}},
		{"flat node pools", "/nodepools", map[string][]string{"A": {"pool"}, "B": {"pool"}, "admin": {"pool", "pool"}, "adapter": {"pool", "pool"}}},
		{"flat node pools by search", "/nodepools?" + search("name = 'pool'"), map[string][]string{"A": {"pool"}, "B": {"pool"}, "admin": {"pool", "pool"}}},
		{"node pools of B's cluster", "/clusters/" + e.clusterB.Id.String() + "/nodepools", map[string][]string{"B": {"pool"}, "admin": {"pool"}}},
		{"version streams (global)", "/versionstreams", map[string][]string{"A": {defaultStream}, "B": {defaultStream}, "admin": {defaultStream}}},
		{"upgrade schedules (global)", "/upgradeschedules", map[string][]string{"A": {}, "B": {}}},
	}
	tokens := map[string]string{"A": e.userA, "B": e.userB, "admin": e.admin, "adapter": e.adapter}
	tenants := map[string]string{"A": e.tenantA, "B": e.tenantB}
	for _, tc := range tests {
		for who, want := range tc.want {
			t.Run(tc.name+" as "+who, func(t *testing.T) {
				status, body := tenancyDo(t, e.s, tokens[who], http.MethodGet, tc.path, "", "")
				require.Equal(t, http.StatusOK, status, "body: %s", body)
				require.Equal(t, want, tenancyNames(t, body))
				tenancyCheckItems(t, body, tenants[who])
			})
		}
	}

	// The same name in both tenants is two clusters; each tenant's is its own.
	require.NotEqual(t, e.clusterA.Id, e.clusterB.Id)
	for who, c := range map[string]*api.Cluster{"A": e.clusterA, "B": e.clusterB} {
		got, err := e.s.GetClusterWithResponse(ctxFor(t), c.Id, bearer(tokens[who]))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, got.StatusCode(), "body: %s", got.Body)
		require.Equal(t, "same", got.JSON200.Name)
		var doc struct{ Tenant string }
		require.NoError(t, json.Unmarshal(got.Body, &doc))
		require.Equal(t, tenants[who], doc.Tenant)
	}
	// A name is still unique within a tenant.
	status, body := tenancyDo(t, e.s, e.userB, http.MethodPost, "/clusters", "application/json",
		`{"name": "same", "spec": {"version_stream": "`+defaultStream+`"}}`)
	require.Equal(t, http.StatusConflict, status, "body: %s", body)

	// A global kind's item is readable by both tenants.
	for _, who := range []string{"A", "B"} {
		streams, err := e.s.ListVersionStreamsWithResponse(ctxFor(t), nil, bearer(tokens[who]))
		require.NoError(t, err)
		require.Len(t, streams.JSON200.Items, 1)
		got, err := e.s.GetVersionStreamWithResponse(ctxFor(t), streams.JSON200.Items[0].Id, bearer(tokens[who]))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, got.StatusCode(), "body: %s", got.Body)
	}

	// With tenancy on, a user whose token names no tenant is refused rather than put somewhere.
	status, body = tenancyDo(t, e.s, e.mint("nobody", []auth.Role{auth.RoleUser}, "", nil), http.MethodGet, "/clusters", "", "")
	require.Equal(t, http.StatusForbidden, status, "body: %s", body)
}

// tenancyCheckItems checks that every item of a list shows its tenant, which is tenant's (unless tenant is "", an
// all-tenant caller's, or the item is of a global kind, whose rows are the default tenant's), and that items with
// statuses carry only their own reports.
func tenancyCheckItems(tb testing.TB, body []byte, tenant string) {
	tb.Helper()
	var list struct {
		Items []struct {
			ID              string  `json:"id"`
			Tenant          *string `json:"tenant"`
			AdapterStatuses *[]struct {
				ResourceID string `json:"resource_id"`
			} `json:"adapter_statuses"`
		} `json:"items"`
	}
	require.NoError(tb, json.Unmarshal(body, &list))
	for _, it := range list.Items {
		require.NotNil(tb, it.Tenant, "every resource shows its tenant: item %s", it.ID)
		if tenant != "" && *it.Tenant != "default" {
			require.Equal(tb, tenant, *it.Tenant, "item %s", it.ID)
		}
		if it.AdapterStatuses != nil {
			for _, st := range *it.AdapterStatuses {
				if st.ResourceID != "" {
					require.Equal(tb, it.ID, st.ResourceID)
				}
			}
		}
	}
}

// A watch by a user of B never shows A's resources: not their creation, change or deletion, on the clusters' or
// the node pools' watch, while an admin's watch shows both tenants'.
func TestTenancyWatchShowsOnlyTheCallersTenant(t *testing.T) {
	e := tenancyStart(t)
	hdr := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	watchB := watch(t, e.s.base, "/clusters", hdr(e.userB))
	poolsB := watch(t, e.s.base, "/nodepools", hdr(e.userB))
	watchAdmin := watch(t, e.s.base, "/clusters", hdr(e.admin))

	// A's whole life of a cluster and a node pool, then B's own cluster as the end marker.
	a := tenancyCreateCluster(t, e.s, e.userA, "same")
	pool := tenancyCreatePool(t, e.s, e.userA, a, "pool")
	status, body := tenancyDo(t, e.s, e.userA, http.MethodPatch, "/clusters/"+a.Id.String(), "application/merge-patch+json", `{"labels": {"x": "y"}}`)
	require.Equal(t, http.StatusOK, status, "body: %s", body)
	resp, err := e.s.PostClusterStatusWithResponse(ctxFor(t), a.Id, report("applier", 1, time.Now().UTC(), available("True")), bearer(e.adapter))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	status, body = tenancyDo(t, e.s, e.userA, http.MethodDelete, "/clusters/"+a.Id.String()+"/nodepools/"+pool.Id.String(), "", "")
	require.Equal(t, http.StatusAccepted, status, "body: %s", body)
	status, body = tenancyDo(t, e.s, e.userA, http.MethodDelete, "/clusters/"+a.Id.String(), "", "")
	require.Equal(t, http.StatusAccepted, status, "body: %s", body)
	b := tenancyCreateCluster(t, e.s, e.userB, "same")
	bPool := tenancyCreatePool(t, e.s, e.userB, b, "pool")

	for _, tc := range []struct {
		name string
		w    *watcher
		want []string // the ids of the events' resources, up to the marker
	}{
		{"B's clusters", watchB, []string{b.Id.String()}},
		{"B's node pools", poolsB, []string{bPool.Id.String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.w.next()
			require.Equal(t, "created", ev.Event, "the first event B sees is its own: %s", ev.Raw)
			require.Equal(t, tc.want, []string{ev.Data.Id.String()}, "A's events are not in B's watch: %s", ev.Raw)
			tc.w.quiet(300 * time.Millisecond)
		})
	}
	t.Run("admin", func(t *testing.T) {
		var seen []string
		for !slices.Contains(seen, b.Id.String()) {
			ev := watchAdmin.next()
			seen = append(seen, ev.Data.Id.String())
		}
		require.Contains(t, seen, a.Id.String(), "the admin's watch shows A's cluster")
	})
}

// The relay labels every message with its resource's tenant (header Hyperfleet-Tenant), so that a consumer confined
// to one tenant can filter; the subjects name no tenant's resources.
func TestTenancyRelayLabelsEveryMessage(t *testing.T) {
	js, stream, prefix := testStream(t)
	e := tenancyStart(t, func(cfg *server.Config) {
		cfg.EventsNATSURL, cfg.EventsNATSStream, cfg.EventsNATSSubjectPrefix = natsURL, stream, prefix
	})
	e.seed(t)
	head := eventHead(t, e.s.dsn)
	require.Eventually(t, func() bool { return relayedThrough(js, stream, head) }, 10*time.Second, 20*time.Millisecond)

	tenantOf := map[string]string{
		e.clusterA.Id.String(): e.tenantA, e.onlyA.Id.String(): e.tenantA, e.poolA.Id.String(): e.tenantA,
		e.clusterB.Id.String(): e.tenantB, e.poolB.Id.String(): e.tenantB,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	seen := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		require.NoError(t, err)
		var ev api.WatchEvent
		require.NoError(t, json.Unmarshal(m.Data, &ev))
		for _, id := range tenantOf {
			require.NotContains(t, m.Subject, id, "subjects name kinds and types, never a resource")
		}
		want, tenanted := tenantOf[ev.Id.String()]
		if !tenanted {
			want = "default" // a global kind's resource (the seeded version stream)
		}
		require.Equal(t, want, m.Header.Get(eventrelay.TenantHeader), "message %d: %s %s", seq, m.Subject, m.Data)
		seen[want]++
	}
	require.Positive(t, seen[e.tenantA])
	require.Positive(t, seen[e.tenantB])
}

// A platform user of a tenant creates and changes the global kinds, which every tenant then reads: their rows, and
// their history, are the default tenant's, not the creator's.
func TestTenancyPlatformUsersWriteGlobalKinds(t *testing.T) {
	e := tenancyStart(t)
	platform := e.mint("paula", []auth.Role{auth.RoleUser, auth.RolePlatform}, "", map[string]any{tenancyClaim: e.tenantA})
	status, body := tenancyDo(t, e.s, platform, http.MethodPost, "/versionstreams", "application/json",
		`{"name": "fast-4-17", "spec": {"target_version": "4.17"}}`)
	require.Equal(t, http.StatusCreated, status, "body: %s", body)
	var stream api.Resource
	require.NoError(t, json.Unmarshal(body, &stream))
	status, body = tenancyDo(t, e.s, platform, http.MethodPatch, "/versionstreams/"+stream.Id.String(), "application/merge-patch+json", `{"labels": {"tier": "fast"}}`)
	require.Equal(t, http.StatusOK, status, "body: %s", body)
	status, body = tenancyDo(t, e.s, e.userB, http.MethodGet, "/versionstreams?search="+url.QueryEscape("labels.tier = 'fast'"), "", "")
	require.Equal(t, http.StatusOK, status, "body: %s", body)
	require.Equal(t, []string{"fast-4-17"}, tenancyNames(t, body))
}
