package integration

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func TestClusterLifecycle(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)

	created, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{
		Name: "prod-east", Labels: ptr(api.Labels{"env": "prod"}), Spec: clusterSpec(defaultStream),
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), "body: %s", created.Body)
	c := created.JSON201
	require.Equal(t, "/api/hyperfleet/v1/clusters/"+c.Id.String(), created.HTTPResponse.Header.Get("Location"))
	require.Equal(t, c.Href, created.HTTPResponse.Header.Get("Location"))
	require.Equal(t, `"1"`, created.HTTPResponse.Header.Get("ETag"))
	require.Equal(t, "Cluster", c.Kind)
	require.Equal(t, int64(1), c.Generation)
	require.Equal(t, api.Labels{"env": "prod"}, c.Labels)
	require.Equal(t, api.ResourceStatusPhasePending, c.Status.Phase, "no required adapter has reported")
	require.Equal(t, "dev-admin", c.CreatedBy)
	// Defaults of internal and public fields are stored, so adapters see the effective spec.
	hc := c.Spec.HostedCluster
	require.NotNil(t, hc.Platform)
	require.Equal(t, api.ClusterSpecHostedClusterPlatformType("None"), hc.Platform.Type)
	require.Equal(t, api.ClusterSpecHostedClusterControllerAvailabilityPolicy("HighlyAvailable"), *hc.ControllerAvailabilityPolicy)
	require.Len(t, *hc.Services, 4)

	got, err := s.GetClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode())
	require.Equal(t, c.Spec, got.JSON200.Spec)
	require.True(t, c.CreatedTime.Equal(got.JSON200.CreatedTime))

	// Labels alone never bump the generation.
	patched, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
		api.ResourcePatch{Labels: &map[string]*string{"env": nil, "team": ptr("core")}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patched.StatusCode(), "body: %s", patched.Body)
	require.Equal(t, api.Labels{"team": "core"}, patched.JSON200.Labels)
	require.Equal(t, int64(1), patched.JSON200.Generation)
	require.Equal(t, "2", patched.JSON200.ResourceVersion, "every write moves the version")
	require.Equal(t, `"2"`, patched.HTTPResponse.Header.Get("ETag"))

	// A semantic spec change bumps it once; the same change again is a no-op.
	for i, want := range []int64{2, 2} {
		version := strconv.FormatInt(want+1, 10) // created 1, labels 2
		p, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
			api.ResourcePatch{Spec: &map[string]interface{}{"hosted_cluster": map[string]any{"infrastructure_availability_policy": "HighlyAvailable"}}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, p.StatusCode(), "patch %d: %s", i, p.Body)
		require.Equal(t, want, p.JSON200.Generation, "patch %d", i)
		require.Equal(t, `"`+version+`"`, p.HTTPResponse.Header.Get("ETag"), "a no-op writes nothing")
		require.Equal(t, version, p.JSON200.ResourceVersion)
		require.Equal(t, api.ClusterSpecHostedClusterInfrastructureAvailabilityPolicyHighlyAvailable, *p.JSON200.Spec.HostedCluster.InfrastructureAvailabilityPolicy)
		require.Equal(t, "example.com", *p.JSON200.Spec.HostedCluster.Dns.BaseDomain, "merge keeps siblings")
	}

	deleted, err := s.DeleteClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, deleted.StatusCode(), "body: %s", deleted.Body)
	require.NotNil(t, deleted.JSON202.DeletedTime)
	require.Equal(t, int64(3), deleted.JSON202.Generation)
	require.Equal(t, api.ResourceStatusPhaseDeleting, deleted.JSON202.Status.Phase)

	// A deleting resource is readable, hidden from lists by default, and frozen.
	got, err = s.GetClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode())
	require.NotNil(t, got.JSON200.DeletedTime)
	list, err := s.ListClustersWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, int64(0), deref(list.JSON200.Total))
	list, err = s.ListClustersWithResponse(ctx, &api.ListClustersParams{IncludeDeleted: ptr(true)})
	require.NoError(t, err)
	require.Equal(t, int64(1), deref(list.JSON200.Total))
	frozen, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil, api.ResourcePatch{Labels: &map[string]*string{"a": ptr("b")}})
	require.NoError(t, err)
	problem(t, frozen.HTTPResponse, frozen.Body, http.StatusConflict, "HYPERFLEET-CNF-003")

	// Deleting again is accepted and changes nothing.
	again, err := s.DeleteClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, again.StatusCode())
	require.Equal(t, int64(3), again.JSON202.Generation)

	// The name is free again once the holder is deleting.
	createCluster(t, s, "prod-east", nil)
}

func TestKindsWithoutRequiredAdaptersAreReadyAndRemovedAtOnce(t *testing.T) {
	s := startServerWith(t, nil)
	ctx := ctxFor(t)
	c := createCluster(t, s, "plain", nil)
	require.Equal(t, api.ResourceStatusPhaseReady, c.Status.Phase)
	require.Empty(t, c.Status.Conditions)
	np := createNodePool(t, s, c, "pool", 1)

	del, err := s.DeleteClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, del.StatusCode())
	require.Equal(t, api.ResourceStatusPhaseDeleting, del.JSON202.Status.Phase)
	for _, resp := range []func() (int, error){
		func() (int, error) { r, err := s.GetClusterWithResponse(ctx, c.Id); return r.StatusCode(), err },
		func() (int, error) { r, err := s.GetNodePoolWithResponse(ctx, c.Id, np.Id); return r.StatusCode(), err },
	} {
		code, err := resp()
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, code)
	}
}

func TestNodePoolsLiveUnderTheirCluster(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	a := createCluster(t, s, "cluster-a", nil)
	b := createCluster(t, s, "cluster-b", nil)
	np := createNodePool(t, s, a, "workers", 3)
	require.Equal(t, "NodePool", np.Kind)
	require.Equal(t, api.ObjectReference{Id: a.Id, Kind: "Cluster", Href: a.Href}, np.OwnerReferences)
	require.Equal(t, a.Href+"/nodepools/"+np.Id.String(), np.Href)
	require.Equal(t, "Ubuntu 22.04", *np.Spec.Platform.Hivelocity.OsName, "schema default")
	require.NotNil(t, np.Spec.Remediation, "internal default")

	// Names are unique per cluster, not globally.
	createNodePool(t, s, b, "workers", 1)
	dup, err := s.CreateNodePoolWithResponse(ctx, a.Id, nil, api.NodePoolCreate{Name: "workers", Spec: nodePoolSpec(1)})
	require.NoError(t, err)
	problem(t, dup.HTTPResponse, dup.Body, http.StatusConflict, "HYPERFLEET-CNF-001")

	// A node pool is only found under its own cluster.
	wrong, err := s.GetNodePoolWithResponse(ctx, b.Id, np.Id)
	require.NoError(t, err)
	problem(t, wrong.HTTPResponse, wrong.Body, http.StatusNotFound, "HYPERFLEET-NTF-001")
	right, err := s.GetNodePoolWithResponse(ctx, a.Id, np.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, right.StatusCode())

	nested, err := s.ListClusterNodePoolsWithResponse(ctx, a.Id, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), deref(nested.JSON200.Total))
	require.Equal(t, "NodePoolList", nested.JSON200.Kind)
	flat, err := s.ListNodePoolsWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, int64(2), deref(flat.JSON200.Total))

	missing := uuid.New()
	for name, status := range map[string]func() (*http.Response, []byte){
		"create under missing cluster": func() (*http.Response, []byte) {
			r, err := s.CreateNodePoolWithResponse(ctx, missing, nil, api.NodePoolCreate{Name: "workers", Spec: nodePoolSpec(1)})
			require.NoError(t, err)
			return r.HTTPResponse, r.Body
		},
		"list under missing cluster": func() (*http.Response, []byte) {
			r, err := s.ListClusterNodePoolsWithResponse(ctx, missing, nil)
			require.NoError(t, err)
			return r.HTTPResponse, r.Body
		},
	} {
		t.Run(name, func(t *testing.T) {
			resp, body := status()
			p := problem(t, resp, body, http.StatusNotFound, "HYPERFLEET-NTF-001")
			require.Contains(t, *p.Detail, "Cluster")
		})
	}

	scaled, err := s.PatchNodePoolWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, a.Id, np.Id, nil,
		api.ResourcePatch{Spec: &map[string]interface{}{"replicas": 5}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, scaled.StatusCode(), "body: %s", scaled.Body)
	require.Equal(t, 5, scaled.JSON200.Spec.Replicas)
	require.Equal(t, int64(2), scaled.JSON200.Generation)

	del, err := s.DeleteNodePoolWithResponse(ctx, a.Id, np.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, del.StatusCode())
	require.Equal(t, int64(3), del.JSON202.Generation)
}

func TestDeletingAClusterCascadesToItsNodePools(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	c := createCluster(t, s, "doomed", nil)
	other := createCluster(t, s, "survivor", nil)
	pools := []*api.NodePool{createNodePool(t, s, c, "pool-a", 1), createNodePool(t, s, c, "pool-b", 2)}
	kept := createNodePool(t, s, other, "pool-a", 1)

	resp, err := s.DeleteClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, resp.StatusCode())

	for _, np := range pools {
		got, err := s.GetNodePoolWithResponse(ctx, c.Id, np.Id)
		require.NoError(t, err)
		require.NotNil(t, got.JSON200.DeletedTime, np.Name)
		require.Equal(t, np.Generation+1, got.JSON200.Generation, np.Name)
		require.Equal(t, api.ResourceStatusPhaseDeleting, got.JSON200.Status.Phase)
		require.Equal(t, "dev-admin", deref(got.JSON200.DeletedBy))
	}
	got, err := s.GetNodePoolWithResponse(ctx, other.Id, kept.Id)
	require.NoError(t, err)
	require.Nil(t, got.JSON200.DeletedTime, "another cluster's pool is untouched")

	late, err := s.CreateNodePoolWithResponse(ctx, c.Id, nil, api.NodePoolCreate{Name: "pool-c", Spec: nodePoolSpec(1)})
	require.NoError(t, err)
	problem(t, late.HTTPResponse, late.Body, http.StatusConflict, "HYPERFLEET-CNF-002")
}

// If-Match compares the resource's version, which every write moves: a spec change, a label change and an
// adapter's report that changes the status all make an earlier ETag stale, and of concurrent writers holding the
// same ETag exactly one wins.
func TestIfMatchGuardsConcurrentEdits(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	c := createCluster(t, s, "guarded", nil)
	spec := func(key string) api.ResourcePatch {
		return api.ResourcePatch{Spec: &map[string]interface{}{"hosted_cluster": map[string]any{"ssh_public_key": key}}}
	}
	ok, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, &api.PatchClusterParams{IfMatch: ptr(`"1"`)}, spec("ssh-ed25519 A"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, ok.StatusCode(), "body: %s", ok.Body)
	require.Equal(t, int64(2), ok.JSON200.Generation)

	stale, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, &api.PatchClusterParams{IfMatch: ptr(`"1"`)}, spec("ssh-ed25519 B"))
	require.NoError(t, err)
	p := problem(t, stale.HTTPResponse, stale.Body, http.StatusPreconditionFailed, "HYPERFLEET-CNF-004")
	require.Contains(t, *p.Detail, `at "2"`)

	bad, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, &api.PatchClusterParams{IfMatch: ptr(`W/"x"`)}, spec("ssh-ed25519 B"))
	require.NoError(t, err)
	problem(t, bad.HTTPResponse, bad.Body, http.StatusBadRequest, "HYPERFLEET-VAL-001")

	// Twenty label changes sent at once with the same ETag: labels do not move the generation, but one write
	// must still make the others stale.
	got, err := s.GetClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	etag := got.HTTPResponse.Header.Get("ETag")
	require.Equal(t, `"`+got.JSON200.ResourceVersion+`"`, etag)
	const writers = 20
	codes := make(chan int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, &api.PatchClusterParams{IfMatch: ptr(etag)},
				api.ResourcePatch{Labels: &map[string]*string{"writer": ptr(strconv.Itoa(i))}})
			if err != nil {
				codes <- 0
				return
			}
			codes <- r.StatusCode()
		}()
	}
	wg.Wait()
	close(codes)
	counts := map[int]int{}
	for code := range codes {
		counts[code]++
	}
	require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusPreconditionFailed: writers - 1}, counts)

	// An adapter's report that changes the status is a write too.
	before, err := s.GetClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.NotEqual(t, etag, before.HTTPResponse.Header.Get("ETag"))
	postClusterStatus(t, s, c, report("applier", 2, time.Now(), available("True")), http.StatusCreated)
	after, err := s.GetClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.NotEqual(t, before.JSON200.Status, after.JSON200.Status, "the report changes the status")
	require.NotEqual(t, before.HTTPResponse.Header.Get("ETag"), after.HTTPResponse.Header.Get("ETag"),
		"one ETag must not name two representations")
	late, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id,
		&api.PatchClusterParams{IfMatch: ptr(before.HTTPResponse.Header.Get("ETag"))}, spec("ssh-ed25519 C"))
	require.NoError(t, err)
	problem(t, late.HTTPResponse, late.Body, http.StatusPreconditionFailed, "HYPERFLEET-CNF-004")

	final, err := s.GetClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, "ssh-ed25519 A", *final.JSON200.Spec.HostedCluster.SshPublicKey, "the stale writes left nothing behind")
	require.Equal(t, int64(2), final.JSON200.Generation)
}

func TestConcurrentCreatesOfOneNameYieldOneWinner(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	const n = 16
	codes := make(chan int, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			resp, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "contended", Spec: clusterSpec(defaultStream)})
			if err != nil {
				codes <- -1
				return
			}
			codes <- resp.StatusCode()
		}()
	}
	close(start)
	count := map[int]int{}
	for range n {
		count[<-codes]++
	}
	require.Equal(t, map[int]int{http.StatusCreated: 1, http.StatusConflict: n - 1}, count)
	list, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Search: ptr("name = 'contended'")})
	require.NoError(t, err)
	require.Equal(t, int64(1), deref(list.JSON200.Total))
}

func TestAPIInfoAndOpenAPIDocument(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	info, err := s.GetAPIInfoWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, api.APIInfo{Kind: "API", Version: "test", Build: "test"}, *info.JSON200)

	for _, tc := range []struct{ query, contentType, mustHave string }{
		{"", "application/yaml", "openapi: 3.0.3"},
		{"?format=json", "application/json", `"openapi"`},
	} {
		resp, err := s.http.Get(s.base + "/openapi" + tc.query)
		require.NoError(t, err)
		body := readAll(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, tc.contentType, resp.Header.Get("Content-Type"))
		require.Contains(t, body, tc.mustHave)
		require.NotContains(t, body, "x-hyperfleet-internal")
		require.NotContains(t, body, "remediation", "internal fields are not published")
		require.True(t, strings.Contains(body, "ClusterSpec"))
	}
}

func TestSwaggerUIIsServedFromTheBinary(t *testing.T) {
	s := startServer(t)
	resp, err := s.http.Get(s.base + "/openapi-ui")
	require.NoError(t, err)
	page := readAll(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "swagger-ui")
	require.Contains(t, page, "/openapi?format=json")
	require.NotContains(t, page, "cdn", "no asset may come from a CDN")
	// Every script and stylesheet the page names is served by the API itself.
	assets := regexp.MustCompile(`(?:src|href)="([^"]+\.(?:js|css))"`).FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, assets)
	for _, asset := range assets {
		u := asset[1]
		if !strings.HasPrefix(u, "/") {
			u = "/openapi-ui/" + strings.TrimPrefix(u, "./")
		}
		r, err := s.http.Get(s.base + u)
		require.NoError(t, err)
		body := readAll(t, r)
		require.Equal(t, http.StatusOK, r.StatusCode, u)
		require.NotEmpty(t, body, u)
	}
}
