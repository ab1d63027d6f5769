package integration

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/pkg/shard"
)

// acquire asks for replica's leases of testAdapter and returns the grant.
func acquire(tb testing.TB, s *apiServer, replica string, count int, held map[int]int64, editors ...api.RequestEditorFn) *api.ShardLeaseGrant {
	tb.Helper()
	resp := acquireAnswer(tb, s, api.ShardLeaseRequest{Replica: replica, ShardCount: count, TtlSeconds: 60, Held: heldList(held)}, editors...)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	return resp.JSON200
}

func acquireAnswer(tb testing.TB, s *apiServer, body api.ShardLeaseRequest, editors ...api.RequestEditorFn) *api.AcquireShardLeasesResponse {
	tb.Helper()
	resp, err := s.AcquireShardLeasesWithResponse(ctxFor(tb), testAdapter, body, editors...)
	require.NoError(tb, err)
	return resp
}

func heldList(held map[int]int64) *[]api.HeldShardLease {
	out := []api.HeldShardLease{}
	for s, g := range held {
		out = append(out, api.HeldShardLease{Shard: s, Generation: g})
	}
	return &out
}

func grantedShards(g *api.ShardLeaseGrant) map[int]int64 {
	out := map[int]int64{}
	for _, l := range g.Leases {
		out[l.Shard] = l.Generation
	}
	return out
}

// leaseTable reads testAdapter's leases: the live holder of each shard ("" when free or expired).
func leaseTable(tb testing.TB, s *apiServer) map[int]string {
	tb.Helper()
	resp, err := s.ListShardLeasesWithResponse(ctxFor(tb), testAdapter)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	out := map[int]string{}
	for _, l := range resp.JSON200.Items {
		out[l.Shard] = deref(l.Holder)
	}
	return out
}

func TestShardLeaseAPIShares(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	require.Empty(t, leaseTable(t, s), "an adapter that never asked has no leases")

	a := acquire(t, s, "a", 4, nil)
	require.Len(t, a.Leases, 4, "alone, a replica takes every shard")
	require.Equal(t, 1, a.LiveReplicas)
	b := acquire(t, s, "b", 4, nil)
	require.Empty(t, b.Leases, "nothing is free yet")
	require.Equal(t, 2, b.LiveReplicas)

	a = acquire(t, s, "a", 4, grantedShards(a))
	require.Len(t, a.Leases, 2, "a gives back above its share while b is short")
	require.Equal(t, []int{2, 3}, a.Lost)
	b = acquire(t, s, "b", 4, nil)
	require.Equal(t, []int{2, 3}, []int{b.Leases[0].Shard, b.Leases[1].Shard})
	require.Equal(t, map[int]string{0: "a", 1: "a", 2: "b", 3: "b"}, leaseTable(t, s))

	resp := acquireAnswer(t, s, api.ShardLeaseRequest{Replica: "c", ShardCount: 8, TtlSeconds: 60})
	problem(t, resp.HTTPResponse, resp.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-006")
	resp = acquireAnswer(t, s, api.ShardLeaseRequest{Replica: "", ShardCount: 4, TtlSeconds: 0})
	problem(t, resp.HTTPResponse, resp.Body, http.StatusBadRequest, "HYPERFLEET-VAL-002")

	release := true
	resp = acquireAnswer(t, s, api.ShardLeaseRequest{Replica: "b", ShardCount: 4, TtlSeconds: 60, Held: heldList(grantedShards(b)), Release: &release})
	require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	require.Empty(t, resp.JSON200.Leases)
	require.Equal(t, map[int]string{0: "a", 1: "a", 2: "", 3: ""}, leaseTable(t, s), "a release frees at once")
	a = acquire(t, s, "a", 4, grantedShards(a))
	require.Len(t, a.Leases, 4, "b left: a takes its shards")
}

func TestShardLeaseOnlyAdaptersAndAdmins(t *testing.T) {
	s, mint := startSecuredServer(t)
	body := api.ShardLeaseRequest{Replica: "r", ShardCount: 2, TtlSeconds: 10}
	tests := []struct {
		name  string
		token string
		want  int
	}{
		{name: "the adapter itself", token: mint("test-adapter-sa", []auth.Role{auth.RoleAdapter}, testAdapter), want: http.StatusOK},
		{name: "an admin", token: mint("root", []auth.Role{auth.RoleAdmin}, ""), want: http.StatusOK},
		{name: "another adapter", token: mint("applier-sa", []auth.Role{auth.RoleAdapter}, "applier"), want: http.StatusForbidden},
		{name: "a user", token: mint("alice", []auth.Role{auth.RoleUser}, ""), want: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := acquireAnswer(t, s, body, bearer(tt.token))
			require.Equal(t, tt.want, resp.StatusCode(), "body: %s", resp.Body)
		})
	}
	// Any reader may list them.
	list, err := s.ListShardLeasesWithResponse(ctxFor(t), testAdapter, bearer(mint("vera", []auth.Role{auth.RoleViewer}, "")))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, list.StatusCode(), "body: %s", list.Body)
	require.Equal(t, "r", deref(list.JSON200.Items[0].Holder))
}

// The fence: a report made under a lease is stored only while its generation is the holder's, and only about a
// resource of its shard; a report without lease metadata is stored as ever.
func TestShardLeaseFencesReports(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	stream := streamNamed(t, s, defaultStream)
	const count = 4
	mine := shard.Of(stream.Id.String(), count)
	a := acquire(t, s, "a", count, nil)
	gen := grantedShards(a)[mine]
	report := func(metadata map[string]any) (int, string) {
		t.Helper()
		resp, err := s.PutVersionStreamStatusWithResponse(ctxFor(t), stream.Id, api.AdapterStatusReport{
			Adapter: testAdapter, ObservedGeneration: stream.Generation, ObservedTime: time.Now(),
			Conditions: []api.ReportedCondition{{Type: conditions.Available, Status: api.ReportedConditionStatusTrue, Reason: ptr("Fine")}},
			Metadata:   &metadata,
		})
		require.NoError(t, err)
		code := ""
		if resp.StatusCode() >= 300 {
			var p api.Problem
			require.NoError(t, json.Unmarshal(resp.Body, &p))
			code = p.Code
		}
		return resp.StatusCode(), code
	}
	stamp := func(s, c int, g int64) map[string]any {
		return map[string]any{shard.MetadataShard: s, shard.MetadataShardCount: c, shard.MetadataLeaseGeneration: g, "replica": "a"}
	}

	status, _ := report(stamp(mine, count, gen))
	require.Equal(t, http.StatusCreated, status, "the holder's report is stored")

	// b takes over once a is gone (a release here; an expiry is the same change of holder).
	release := true
	resp := acquireAnswer(t, s, api.ShardLeaseRequest{Replica: "a", ShardCount: count, TtlSeconds: 60, Release: &release})
	require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	b := acquire(t, s, "b", count, nil)
	require.Greater(t, grantedShards(b)[mine], gen)

	tests := []struct {
		name     string
		metadata map[string]any
		status   int
		code     string
	}{
		{name: "a's late report", metadata: stamp(mine, count, gen), status: http.StatusConflict, code: "HYPERFLEET-CNF-008"},
		{name: "another shard count", metadata: stamp(shard.Of(stream.Id.String(), 8), 8, grantedShards(b)[mine]), status: http.StatusConflict, code: "HYPERFLEET-CNF-008"},
		{name: "a shard the resource is not in", metadata: stamp((mine+1)%count, count, grantedShards(b)[mine]), status: http.StatusBadRequest, code: "HYPERFLEET-VAL-002"},
		{name: "a generation without its shard", metadata: map[string]any{shard.MetadataLeaseGeneration: 1}, status: http.StatusBadRequest, code: "HYPERFLEET-VAL-002"},
		{name: "b's report", metadata: stamp(mine, count, grantedShards(b)[mine]), status: http.StatusOK},
		{name: "static sharding, no lease", metadata: map[string]any{"replica": "c", "shard_index": 0, "shard_count": 1}, status: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, code := report(tt.metadata)
			require.Equal(t, tt.status, status)
			require.Equal(t, tt.code, code)
		})
	}
	st := adapterReport(t, s, stream, testAdapter)
	require.Equal(t, "c", st.Metadata["replica"], "refused reports stored nothing")
}
