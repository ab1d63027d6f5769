package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// tenantsClaim is the token claim that names the caller's tenant in these tests.
const tenantsClaim = "org"

// tenantsEnv is a server with JWT, roles and tenancy on, and a way to act as anyone in any tenant.
type tenantsEnv struct {
	*apiServer
	issuer *auth.DevIssuer
}

func tenantsStart(tb testing.TB) *tenantsEnv {
	tb.Helper()
	issuer, err := auth.LoadOrCreateDevIssuer(tb.TempDir())
	require.NoError(tb, err)
	s := startServerOn(tb, harness.NewDatabase(tb), server.Config{
		RequiredAdapters: map[string][]string{"cluster": {"applier"}, "nodepool": {"applier"}},
		EnableJWT:        true, EnableAuthz: true,
		JWT: auth.VerifierConfig{JWKSFile: issuer.JWKSPath(), Issuer: testIssuer, Audience: testAudience, TenantClaim: tenantsClaim},
	})
	return &tenantsEnv{apiServer: s, issuer: issuer}
}

// as returns a bearer token editor for subject with role in tenant ("" names none).
func (e *tenantsEnv) as(tb testing.TB, subject string, role auth.Role, tenant string) api.RequestEditorFn {
	tb.Helper()
	var claims []map[string]any
	if tenant != "" {
		claims = append(claims, map[string]any{tenantsClaim: tenant})
	}
	token, err := e.issuer.Mint(subject, []auth.Role{role}, "", time.Hour, testIssuer, testAudience, claims...)
	require.NoError(tb, err)
	return bearer(token)
}

func (e *tenantsEnv) admin(tb testing.TB) api.RequestEditorFn {
	tb.Helper()
	return e.as(tb, "root", auth.RoleAdmin, "")
}

func (e *tenantsEnv) user(tb testing.TB, tenant string) api.RequestEditorFn {
	tb.Helper()
	return e.as(tb, "user@"+tenant, auth.RoleUser, tenant)
}

// setQuotas sets a tenant's quotas as an admin.
func (e *tenantsEnv) setQuotas(tb testing.TB, tenant string, clusters, devices *int64) *api.Tenant {
	tb.Helper()
	resp, err := e.PutTenantWithResponse(ctxFor(tb), tenant, api.TenantPut{Quotas: api.TenantQuotas{Clusters: clusters, NodepoolDevices: devices}}, e.admin(tb))
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON200
}

// raw sends a request with a JSON body (or none) and returns the answer and its body: for what the generated
// client does not send (query parameters and members the document may not have yet).
func (e *tenantsEnv) raw(tb testing.TB, editor api.RequestEditorFn, method, path, body string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctxFor(tb), method, e.base+"/api/hyperfleet/v1"+path, strings.NewReader(body))
	require.NoError(tb, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	require.NoError(tb, editor(req.Context(), req))
	resp, err := e.http.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return resp, out
}

func tenantsClusterBody(name string) api.ClusterCreate {
	return api.ClusterCreate{Name: name, Spec: clusterSpec(defaultStream)}
}

// requireQuotaProblem checks a QTA-001 answer names the quota, its use and its limit.
func requireQuotaProblem(tb testing.TB, resp *http.Response, body []byte, name string, used, limit int64) {
	tb.Helper()
	p := problem(tb, resp, body, http.StatusUnprocessableEntity, "HYPERFLEET-QTA-001")
	require.Contains(tb, deref(p.Detail), "quota "+name)
	require.Contains(tb, deref(p.Detail), fmt.Sprintf("%d in use of %d", used, limit))
	require.NotNil(tb, p.Errors)
	require.Len(tb, *p.Errors, 1)
	require.Equal(tb, "quota."+name, (*p.Errors)[0].Field)
}

// 50 concurrent creates against a quota of 10 store exactly 10; the other 40 are QTA-001 naming the quota, its use
// and its limit. Another tenant is not held back by the first one's quota.
func TestQuotaConcurrentClusterCreates(t *testing.T) {
	e := tenantsStart(t)
	e.setQuotas(t, "acme", ptr(int64(10)), nil)
	alice := e.user(t, "acme")
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			resp, err := e.CreateClusterWithResponse(ctxFor(t), nil, tenantsClusterBody(fmt.Sprintf("quota-%02d", i)), alice)
			if !assertNoError(t, err) {
				return
			}
			if resp.StatusCode() == http.StatusUnprocessableEntity {
				requireQuotaProblem(t, resp.HTTPResponse, resp.Body, "clusters", 10, 10)
			}
			mu.Lock()
			codes[resp.StatusCode()]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusCreated: 10, http.StatusUnprocessableEntity: 40}, codes)

	list, err := e.ListClustersWithResponse(ctxFor(t), nil, alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, list.StatusCode(), "body: %s", list.Body)
	require.Equal(t, int64(10), deref(list.JSON200.Total))
	own, err := e.GetOwnTenantWithResponse(ctxFor(t), alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, own.StatusCode(), "body: %s", own.Body)
	require.Equal(t, api.TenantUsage{Clusters: 10}, own.JSON200.Usage)
	require.Equal(t, ptr(int64(10)), own.JSON200.Quotas.Clusters)

	other, err := e.CreateClusterWithResponse(ctxFor(t), nil, tenantsClusterBody("quota-00"), e.user(t, "beta"))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, other.StatusCode(), "another tenant has its own quota (none): body %s", other.Body)
}

// assertNoError reports err as a test failure without stopping the goroutine's test from another goroutine.
func assertNoError(tb testing.TB, err error) bool {
	tb.Helper()
	if err != nil {
		tb.Errorf("request failed: %v", err)
		return false
	}
	return true
}

// Node pools count their replicas against nodepool_devices: concurrent pools of 3 under a limit of 12 store 4.
func TestQuotaConcurrentNodePoolDevices(t *testing.T) {
	e := tenantsStart(t)
	alice := e.user(t, "acme")
	cluster, err := e.CreateClusterWithResponse(ctxFor(t), nil, tenantsClusterBody("devices"), alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, cluster.StatusCode(), "body: %s", cluster.Body)
	e.setQuotas(t, "acme", nil, ptr(int64(12)))
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			resp, err := e.CreateNodePoolWithResponse(ctxFor(t), cluster.JSON201.Id, nil,
				api.NodePoolCreate{Name: fmt.Sprintf("pool-%02d", i), Spec: nodePoolSpec(3)}, alice)
			if !assertNoError(t, err) {
				return
			}
			if resp.StatusCode() == http.StatusUnprocessableEntity {
				requireQuotaProblem(t, resp.HTTPResponse, resp.Body, "nodepool_devices", 12, 12)
			}
			mu.Lock()
			codes[resp.StatusCode()]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusCreated: 4, http.StatusUnprocessableEntity: 8}, codes)
	own, err := e.GetOwnTenantWithResponse(ctxFor(t), alice)
	require.NoError(t, err)
	require.Equal(t, api.TenantUsage{Clusters: 1, NodepoolDevices: 12}, own.JSON200.Usage)
}

// A PATCH that raises a node pool's replicas past the quota is refused; lowering them, or raising them within it,
// is not. A quota set below the use takes nothing away and refuses new use.
func TestQuotaNodePoolPatch(t *testing.T) {
	e := tenantsStart(t)
	alice := e.user(t, "acme")
	cluster, err := e.CreateClusterWithResponse(ctxFor(t), nil, tenantsClusterBody("patches"), alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, cluster.StatusCode(), "body: %s", cluster.Body)
	pools := make([]*api.NodePool, 2)
	for i := range pools {
		resp, err := e.CreateNodePoolWithResponse(ctxFor(t), cluster.JSON201.Id, nil, api.NodePoolCreate{Name: fmt.Sprintf("pool-%d", i), Spec: nodePoolSpec(3)}, alice)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
		pools[i] = resp.JSON201
	}
	e.setQuotas(t, "acme", nil, ptr(int64(6)))
	patch := func(replicas int) (*http.Response, []byte) {
		return e.raw(t, alice, http.MethodPatch, fmt.Sprintf("/clusters/%s/nodepools/%s", cluster.JSON201.Id, pools[0].Id),
			fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	}
	resp, body := patch(4)
	requireQuotaProblem(t, resp, body, "nodepool_devices", 3, 6) // the other pool's 3 in use, this one's replaced
	resp, body = patch(1)
	require.Equal(t, http.StatusOK, resp.StatusCode, "lowering is fine: %s", body)
	resp, body = patch(3)
	require.Equal(t, http.StatusOK, resp.StatusCode, "raising within the quota is fine: %s", body)

	lowered := e.setQuotas(t, "acme", nil, ptr(int64(2)))
	require.Equal(t, api.TenantUsage{Clusters: 1, NodepoolDevices: 6}, lowered.Usage, "a quota below the use takes nothing away")
	more, err := e.CreateNodePoolWithResponse(ctxFor(t), cluster.JSON201.Id, nil, api.NodePoolCreate{Name: "pool-x", Spec: nodePoolSpec(1)}, alice)
	require.NoError(t, err)
	requireQuotaProblem(t, more.HTTPResponse, more.Body, "nodepool_devices", 6, 2)
	resp, body = patch(2)
	require.Equal(t, http.StatusOK, resp.StatusCode, "lowering is fine even over the quota: %s", body)
}

// tenantsStored counts what a create leaves behind: the tenant's clusters, the change feed's rows and the history.
func tenantsStored(tb testing.TB, dsn string) (clusters, events, history int64) {
	tb.Helper()
	db := harness.OpenGorm(tb, dsn)
	require.NoError(tb, db.Raw(`SELECT (SELECT count(*) FROM clusters), (SELECT count(*) FROM event_staging) + (SELECT count(*) FROM events),
		(SELECT count(*) FROM resource_history)`).Row().Scan(&clusters, &events, &history))
	return clusters, events, history
}

// A dry-run create answers the would-be resource and stores nothing (no row, no event, no history); it still
// refuses what a create refuses, a quota overrun among them.
func TestQuotaDryRunCreate(t *testing.T) {
	e := tenantsStart(t)
	alice := e.user(t, "acme")
	body := `{"name":"dry","spec":{"version_stream":"stable-4-16","hosted_cluster":{"dns":{"base_domain":"example.com"}}}}`
	clusters, events, history := tenantsStored(t, e.dsn)

	resp, got := e.raw(t, alice, http.MethodPost, "/clusters?dry_run=true", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", got)
	require.Contains(t, string(got), `"name":"dry"`)
	c2, ev2, h2 := tenantsStored(t, e.dsn)
	require.Equal(t, [3]int64{clusters, events, history}, [3]int64{c2, ev2, h2}, "a dry run stores nothing")
	list, err := e.ListClustersWithResponse(ctxFor(t), nil, alice)
	require.NoError(t, err)
	require.Empty(t, list.JSON200.Items)

	resp, got = e.raw(t, alice, http.MethodPost, "/clusters?dry_run=true", `{"name":"Not A Name","spec":{}}`)
	problem(t, resp, got, http.StatusBadRequest, "HYPERFLEET-VAL-002")

	e.setQuotas(t, "acme", ptr(int64(0)), nil)
	resp, got = e.raw(t, alice, http.MethodPost, "/clusters?dry_run=true", body)
	requireQuotaProblem(t, resp, got, "clusters", 0, 0)
}

// Deletion protection refuses a delete and a force-delete until a PATCH clears it, and a cluster cannot be
// deleted while one of its node pools is protected.
func TestDeletionProtectionBlocksDeletes(t *testing.T) {
	e := tenantsStart(t)
	alice, root := e.user(t, "acme"), e.admin(t)
	resp, body := e.raw(t, alice, http.MethodPost, "/clusters",
		`{"name":"guarded","deletion_protection":true,"spec":{"version_stream":"stable-4-16","hosted_cluster":{"dns":{"base_domain":"example.com"}}}}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "body: %s", body)
	require.Contains(t, string(body), `"deletion_protection":true`)
	id := resp.Header.Get("Location")[strings.LastIndex(resp.Header.Get("Location"), "/")+1:]

	resp, body = e.raw(t, alice, http.MethodDelete, "/clusters/"+id, "")
	problem(t, resp, body, http.StatusConflict, "HYPERFLEET-CNF-007")
	resp, body = e.raw(t, root, http.MethodPost, "/clusters/"+id+"/force-delete", "")
	problem(t, resp, body, http.StatusConflict, "HYPERFLEET-CNF-007")
	resp, body = e.raw(t, alice, http.MethodPatch, "/clusters/"+id, `{"deletion_protection":false}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", body)
	resp, body = e.raw(t, alice, http.MethodDelete, "/clusters/"+id, "")
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "body: %s", body)

	parent, err := e.CreateClusterWithResponse(ctxFor(t), nil, tenantsClusterBody("parent"), alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, parent.StatusCode(), "body: %s", parent.Body)
	resp, body = e.raw(t, alice, http.MethodPost, "/clusters/"+parent.JSON201.Id.String()+"/nodepools",
		`{"name":"kept","spec":{"replicas":1,"platform":{"hivelocity":{"device_type":"s1.small","region":"LAX2"}}}}`)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "body: %s", body)
	poolPath := resp.Header.Get("Location")[len("/api/hyperfleet/v1"):]
	resp, body = e.raw(t, alice, http.MethodPatch, poolPath, `{"deletion_protection":true}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "PATCH turns it on: %s", body)
	resp, body = e.raw(t, alice, http.MethodDelete, "/clusters/"+parent.JSON201.Id.String(), "")
	problem(t, resp, body, http.StatusConflict, "HYPERFLEET-CNF-007")
	resp, body = e.raw(t, root, http.MethodPost, "/clusters/"+parent.JSON201.Id.String()+"/force-delete", "")
	problem(t, resp, body, http.StatusConflict, "HYPERFLEET-CNF-007")
}

// Only admins list tenants and set quotas; a user reads its own tenant, by /tenant or by id, and another tenant's
// id is 404, as if it did not exist.
func TestTenantsAuthorization(t *testing.T) {
	e := tenantsStart(t)
	alice := e.user(t, "acme")
	_, err := e.CreateClusterWithResponse(ctxFor(t), nil, tenantsClusterBody("mine"), alice)
	require.NoError(t, err)
	e.setQuotas(t, "beta", ptr(int64(3)), ptr(int64(9)))

	put, err := e.PutTenantWithResponse(ctxFor(t), "acme", api.TenantPut{Quotas: api.TenantQuotas{Clusters: ptr(int64(100))}}, alice)
	require.NoError(t, err)
	problem(t, put.HTTPResponse, put.Body, http.StatusForbidden, "HYPERFLEET-AUZ-001")
	list, err := e.ListTenantsWithResponse(ctxFor(t), nil, alice)
	require.NoError(t, err)
	problem(t, list.HTTPResponse, list.Body, http.StatusForbidden, "HYPERFLEET-AUZ-001")

	own, err := e.GetOwnTenantWithResponse(ctxFor(t), alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, own.StatusCode(), "body: %s", own.Body)
	require.Equal(t, "acme", own.JSON200.Id)
	require.Equal(t, api.TenantQuotas{}, own.JSON200.Quotas, "no quotas set: no limits")
	require.Equal(t, api.TenantUsage{Clusters: 1}, own.JSON200.Usage)
	byID, err := e.GetTenantWithResponse(ctxFor(t), "acme", alice)
	require.NoError(t, err)
	require.Equal(t, own.JSON200, byID.JSON200)
	other, err := e.GetTenantWithResponse(ctxFor(t), "beta", alice)
	require.NoError(t, err)
	problem(t, other.HTTPResponse, other.Body, http.StatusNotFound, "HYPERFLEET-NTF-001")

	// Strict bodies: an unknown member, and a body without quotas.
	resp, body := e.raw(t, e.admin(t), http.MethodPut, "/tenants/acme", `{"quotas":{"clusters":1,"pools":2}}`)
	problem(t, resp, body, http.StatusBadRequest, "HYPERFLEET-VAL-001")
	resp, body = e.raw(t, e.admin(t), http.MethodPut, "/tenants/acme", `{}`)
	problem(t, resp, body, http.StatusBadRequest, "HYPERFLEET-VAL-001")
	resp, body = e.raw(t, e.admin(t), http.MethodPut, "/tenants/acme", `{"quotas":{"clusters":-1}}`)
	problem(t, resp, body, http.StatusBadRequest, "HYPERFLEET-VAL-002")

	all, err := e.ListTenantsWithResponse(ctxFor(t), &api.ListTenantsParams{Size: ptr(1)}, e.admin(t))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, all.StatusCode(), "body: %s", all.Body)
	require.Len(t, all.JSON200.Items, 1)
	require.Equal(t, "acme", all.JSON200.Items[0].Id)
	require.Equal(t, "acme", deref(all.JSON200.Next))
	rest, err := e.ListTenantsWithResponse(ctxFor(t), &api.ListTenantsParams{After: all.JSON200.Next}, e.admin(t))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rest.StatusCode(), "body: %s", rest.Body)
	require.Len(t, rest.JSON200.Items, 1)
	require.Equal(t, "beta", rest.JSON200.Items[0].Id)
	require.Equal(t, api.TenantQuotas{Clusters: ptr(int64(3)), NodepoolDevices: ptr(int64(9))}, rest.JSON200.Items[0].Quotas)
	require.Equal(t, "root", deref(rest.JSON200.Items[0].UpdatedBy))
	require.Nil(t, rest.JSON200.Next)
}
