package integration

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// historyTenantClaim is the claim the history tests' server reads tenants from.
const historyTenantClaim = "org"

// historyStep is what the history tests check of one entry: everything but its time and sequence.
type historyStep struct {
	Actor, Action        string
	Generation           int64
	Changes              string // compact JSON; "" when the entry has none (or, for created, not compared)
	PhaseFrom, PhaseTo   string
	ReportedBy           string // the adapter of the entry's report, if any
	ReportedAtGeneration int64
}

func historyStepsOf(tb testing.TB, items []api.HistoryEntry) []historyStep {
	tb.Helper()
	out := make([]historyStep, len(items))
	for i, e := range items {
		s := historyStep{Actor: e.Actor, Action: string(e.Action), Generation: e.Generation,
			PhaseFrom: string(deref(e.PhaseFrom)), PhaseTo: string(deref(e.PhaseTo))}
		if e.Changes != nil && e.Action != "created" {
			raw, err := json.Marshal(*e.Changes)
			require.NoError(tb, err)
			s.Changes = string(raw)
		}
		if e.Reports != nil {
			require.Len(tb, *e.Reports, 1, "entry %d", i)
			rep := (*e.Reports)[0]
			s.ReportedBy, s.ReportedAtGeneration = rep.Adapter, rep.ObservedGeneration
			require.NotEmpty(tb, rep.Conditions, "the report's conditions are kept")
		}
		if i > 0 {
			require.Greater(tb, e.Seq, items[i-1].Seq, "entries come in order")
			require.False(tb, e.Time.Before(items[i-1].Time), "entry %d is older than the one before", i)
		}
		out[i] = s
	}
	return out
}

// historyServer serves with tenancy on (tenants from the claim historyTenantClaim) and returns request editors
// for a user of tenant acme, a user of tenant globex and the applier adapter (every tenant).
func historyServer(t *testing.T) (s *apiServer, alice, mallory, applier api.RequestEditorFn) {
	t.Helper()
	issuer, err := auth.LoadOrCreateDevIssuer(t.TempDir())
	require.NoError(t, err)
	s = startServerOn(t, harness.NewDatabase(t), server.Config{
		RequiredAdapters: map[string][]string{"cluster": {"applier"}},
		EnableJWT:        true, EnableAuthz: true,
		JWT: auth.VerifierConfig{JWKSFile: issuer.JWKSPath(), Issuer: testIssuer, Audience: testAudience, TenantClaim: historyTenantClaim},
	})
	mint := func(subject string, role auth.Role, adapter, tenant string) api.RequestEditorFn {
		var extra map[string]any
		if tenant != "" {
			extra = map[string]any{historyTenantClaim: tenant}
		}
		token, err := issuer.MintWithClaims(subject, []auth.Role{role}, adapter, time.Hour, testIssuer, testAudience, extra)
		require.NoError(t, err)
		return bearer(token)
	}
	return s, mint("alice", auth.RoleUser, "", "acme"), mint("mallory", auth.RoleUser, "", "globex"),
		mint("applier-bot", auth.RoleAdapter, "applier", "")
}

// The test: a create, two patches, an adapter report that moves the phase and a delete, each with its
// actor; the history outlives the resource, and another tenant sees none of it.
func TestHistoryRecordsEveryChangeWithItsActor(t *testing.T) {
	s, alice, mallory, applier := historyServer(t)
	ctx := ctxFor(t)

	created, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "demo", Labels: ptr(api.Labels{"env": "dev"}),
		Spec: clusterSpec(defaultStream)}, alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), "body: %s", created.Body)
	c := created.JSON201
	pool, err := s.CreateNodePoolWithResponse(ctx, c.Id, nil, api.NodePoolCreate{Name: "workers", Spec: nodePoolSpec(2)}, alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, pool.StatusCode(), "body: %s", pool.Body)
	np := pool.JSON201

	labels, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
		api.ResourcePatch{Labels: &map[string]*string{"env": ptr("prod"), "team": ptr("core")}}, alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, labels.StatusCode(), "body: %s", labels.Body)
	spec, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
		api.ResourcePatch{Spec: &map[string]any{"hosted_cluster": map[string]any{"infrastructure_availability_policy": "HighlyAvailable"}}}, alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, spec.StatusCode(), "body: %s", spec.Body)
	require.Equal(t, int64(2), spec.JSON200.Generation)

	// The required adapter's report makes the cluster Ready; the same report again moves nothing and adds nothing.
	at := time.Now().UTC().Add(-time.Minute)
	for i := range 2 {
		resp, err := s.PostClusterStatusWithResponse(ctx, c.Id, report("applier", 2, at.Add(time.Duration(i)*time.Second), available("True")), applier)
		require.NoError(t, err)
		require.Contains(t, []int{http.StatusOK, http.StatusCreated}, resp.StatusCode(), "body: %s", resp.Body)
	}
	ready, err := s.GetClusterWithResponse(ctx, c.Id, alice)
	require.NoError(t, err)
	require.Equal(t, api.ResourceStatusPhaseReady, ready.JSON200.Status.Phase)

	deleted, err := s.DeleteClusterWithResponse(ctx, c.Id, alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, deleted.StatusCode(), "body: %s", deleted.Body)

	read := func(as api.RequestEditorFn) *api.ListClusterHistoryResponse {
		t.Helper()
		resp, err := s.ListClusterHistoryWithResponse(ctx, c.Id, nil, as)
		require.NoError(t, err)
		return resp
	}
	before := []historyStep{
		{Actor: "alice", Action: "created", Generation: 1, PhaseTo: "Pending"},
		{Actor: "alice", Action: "updated", Generation: 1, Changes: `{"labels":{"env":"prod","team":"core"}}`},
		{Actor: "alice", Action: "updated", Generation: 2, Changes: `{"spec":{"hosted_cluster":{"infrastructure_availability_policy":"HighlyAvailable"}}}`},
		{Actor: "applier-bot", Action: "status", Generation: 2, PhaseFrom: "Pending", PhaseTo: "Ready", ReportedBy: "applier", ReportedAtGeneration: 2},
		{Actor: "alice", Action: "deleting", Generation: 3, PhaseFrom: "Ready", PhaseTo: "Deleting"},
	}
	got := read(alice)
	require.Equal(t, http.StatusOK, got.StatusCode(), "body: %s", got.Body)
	require.Equal(t, "HistoryList", got.JSON200.Kind)
	require.Equal(t, before, historyStepsOf(t, got.JSON200.Items))
	first := got.JSON200.Items[0]
	require.Equal(t, map[string]any{"env": "dev"}, (*first.Changes)["labels"], "a create's entry holds its labels and spec")
	require.Contains(t, *first.Changes, "spec")

	// Another tenant's user sees no history, exactly as for an id that never existed; so for the node pool.
	other := read(mallory)
	problem(t, other.HTTPResponse, other.Body, http.StatusNotFound, "HYPERFLEET-NTF-001")
	missing, err := s.ListClusterHistoryWithResponse(ctx, uuid.New(), nil, alice)
	require.NoError(t, err)
	problem(t, missing.HTTPResponse, missing.Body, http.StatusNotFound, "HYPERFLEET-NTF-001")

	// The node pool has no required adapter: the cluster's delete removed it at once, by alice.
	pools, err := s.ListNodePoolHistoryWithResponse(ctx, c.Id, np.Id, nil, alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, pools.StatusCode(), "body: %s", pools.Body)
	require.Equal(t, []historyStep{
		{Actor: "alice", Action: "created", Generation: 1, PhaseTo: "Ready"},
		{Actor: "alice", Action: "deleting", Generation: 2, PhaseFrom: "Ready", PhaseTo: "Deleting"},
		{Actor: "alice", Action: "removed", Generation: 2, PhaseFrom: "Deleting"},
	}, historyStepsOf(t, pools.JSON200.Items))
	hidden, err := s.ListNodePoolHistoryWithResponse(ctx, c.Id, np.Id, nil, mallory)
	require.NoError(t, err)
	problem(t, hidden.HTTPResponse, hidden.Body, http.StatusNotFound, "HYPERFLEET-NTF-001")

	// The applier finalizes: the cluster is gone, its history stays, for its tenant only.
	resp, err := s.PostClusterStatusWithResponse(ctx, c.Id, report("applier", 3, time.Now().UTC(), available("False"), cond("Finalized", "True", "")), applier)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	gone, err := s.GetClusterWithResponse(ctx, c.Id, alice)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, gone.StatusCode())
	got = read(alice)
	require.Equal(t, http.StatusOK, got.StatusCode(), "body: %s", got.Body)
	require.Equal(t, append(before, historyStep{Actor: "applier-bot", Action: "removed", Generation: 3, PhaseFrom: "Deleting"}),
		historyStepsOf(t, got.JSON200.Items))
	other = read(mallory)
	problem(t, other.HTTPResponse, other.Body, http.StatusNotFound, "HYPERFLEET-NTF-001")

	// Pages follow the cursor: no entry skipped or repeated, and the last page has no next.
	var paged []api.HistoryEntry
	params := &api.ListClusterHistoryParams{Size: ptr(4)}
	for range 3 {
		page, err := s.ListClusterHistoryWithResponse(ctx, c.Id, params, alice)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, page.StatusCode(), "body: %s", page.Body)
		paged = append(paged, page.JSON200.Items...)
		if page.JSON200.Next == nil {
			break
		}
		var after int64
		require.NoError(t, json.Unmarshal([]byte(*page.JSON200.Next), &after))
		params.After = &after
	}
	require.Equal(t, got.JSON200.Items, paged)
	bad, err := s.ListClusterHistoryWithResponse(ctx, c.Id, &api.ListClusterHistoryParams{Size: ptr(1001)}, alice)
	require.NoError(t, err)
	problem(t, bad.HTTPResponse, bad.Body, http.StatusBadRequest, "HYPERFLEET-VAL-004")
}
