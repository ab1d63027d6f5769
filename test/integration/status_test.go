package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func TestBadStatusReportsAreRejected(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	c := createCluster(t, s, "reported", nil)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	tests := []struct {
		name, body string
		status     int
		code       string
		field      string
	}{
		{"no Available", `{"adapter":"applier","observed_generation":1,"observed_time":"` + now + `","conditions":[{"type":"Health","status":"True"}]}`, 400, "HYPERFLEET-VAL-002", "conditions"},
		{"duplicate types", `{"adapter":"applier","observed_generation":1,"observed_time":"` + now + `","conditions":[{"type":"Available","status":"True"},{"type":"Available","status":"False"}]}`, 400, "HYPERFLEET-VAL-002", "conditions[1].type"},
		{"bad status", `{"adapter":"applier","observed_generation":1,"observed_time":"` + now + `","conditions":[{"type":"Available","status":"yes"}]}`, 400, "HYPERFLEET-VAL-002", "conditions[0].status"},
		{"bad adapter name", `{"adapter":"Applier!","observed_generation":1,"observed_time":"` + now + `","conditions":[{"type":"Available","status":"True"}]}`, 400, "HYPERFLEET-VAL-002", "adapter"},
		{"generation 0", `{"adapter":"applier","observed_generation":0,"observed_time":"` + now + `","conditions":[{"type":"Available","status":"True"}]}`, 400, "HYPERFLEET-VAL-002", "observed_generation"},
		{"too old", `{"adapter":"applier","observed_generation":1,"observed_time":"2020-01-01T00:00:00Z","conditions":[{"type":"Available","status":"True"}]}`, 400, "HYPERFLEET-VAL-002", "observed_time"},
		{"from the future", `{"adapter":"applier","observed_generation":1,"observed_time":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `","conditions":[{"type":"Available","status":"True"}]}`, 400, "HYPERFLEET-VAL-002", "observed_time"},
		{"data too big", `{"adapter":"applier","observed_generation":1,"observed_time":"` + now + `","conditions":[{"type":"Available","status":"True"}],"data":{"x":"` + strings.Repeat("x", 70<<10) + `"}}`, 400, "HYPERFLEET-VAL-002", "data"},
		{"unknown member", `{"adapter":"applier","observed_generation":1,"observed_time":"` + now + `","conditions":[],"colour":1}`, 400, "HYPERFLEET-VAL-001", "colour"},
		{"generation ahead", `{"adapter":"applier","observed_generation":2,"observed_time":"` + now + `","conditions":[{"type":"Available","status":"True"}]}`, 422, "HYPERFLEET-VAL-006", "observed_generation"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.PostClusterStatusWithBodyWithResponse(ctx, c.Id, "application/json", strings.NewReader(tc.body))
			require.NoError(t, err)
			p := problem(t, resp.HTTPResponse, resp.Body, tc.status, tc.code)
			var fields []string
			for _, f := range deref(p.Errors) {
				fields = append(fields, f.Field)
			}
			require.Contains(t, fields, tc.field)
		})
	}
	list, err := s.ListClusterStatusesWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, int64(0), list.JSON200.Total, "nothing stored")
	require.Equal(t, api.ResourceStatusPhasePending, getCluster(t, s, c).Status.Phase)
}

func TestStatusRulesAndAggregation(t *testing.T) {
	s := startServerWith(t, map[string][]string{"cluster": {"applier", "version-resolver"}})
	ctx := ctxFor(t)
	c := createCluster(t, s, "aggregated", nil)
	require.Equal(t, api.ResourceStatusPhasePending, c.Status.Phase)
	var types []string
	for _, x := range c.Status.Conditions {
		types = append(types, x.Type)
	}
	require.Equal(t, []string{"Ready", "Available", "ApplierAvailable", "VersionResolverAvailable"}, types)
	require.Equal(t, "AdaptersMissing", deref(conditionOf(t, c, "Ready").Reason))

	t0 := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond) // what Postgres keeps
	first := postClusterStatus(t, s, c, report("applier", 1, t0, available("True"), cond("Health", "True", "")), http.StatusCreated)
	require.Equal(t, "applier", first.JSON201.Adapter)
	got := getCluster(t, s, c)
	require.Equal(t, api.ResourceStatusPhaseProgressing, got.Status.Phase)
	require.Equal(t, api.ConditionStatus("False"), conditionOf(t, got, "Ready").Status)
	require.Equal(t, api.ConditionStatus("True"), conditionOf(t, got, "ApplierAvailable").Status)

	postClusterStatus(t, s, c, report("version-resolver", 1, t0, available("True")), http.StatusCreated)
	got = getCluster(t, s, c)
	require.Equal(t, api.ResourceStatusPhaseReady, got.Status.Phase)
	ready := conditionOf(t, got, "Ready")
	require.Equal(t, api.ConditionStatus("True"), ready.Status)
	require.Equal(t, "AllAdaptersReady", deref(ready.Reason))
	require.Equal(t, int64(1), deref(ready.ObservedGeneration))

	search, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Search: ptr("status.conditions.Ready = 'True' and status.phase = 'Ready'")})
	require.NoError(t, err)
	require.Equal(t, []string{"aggregated"}, names(search.JSON200.Items))

	// A later report at the same generation replaces the stored one.
	t1 := t0.Add(10 * time.Second)
	again := postClusterStatus(t, s, c, report("applier", 1, t1, available("True"), cond("Health", "True", "")), http.StatusOK)
	require.True(t, again.JSON200.ObservedTime.Equal(t1))
	transition := deref(again.JSON200.Conditions[0].LastTransitionTime)
	require.True(t, transition.Equal(deref(first.JSON201.Conditions[0].LastTransitionTime)), "no flip, no transition: %s then %s", first.Body, again.Body)
	// So does one received later whose adapter's clock runs behind: at one generation the server's order of
	// arrival decides, not the clocks of the adapter's replicas.
	behind := postClusterStatus(t, s, c, report("applier", 1, t0.Add(5*time.Second), available("False")), http.StatusOK)
	require.True(t, behind.JSON200.ObservedTime.Equal(t0.Add(5*time.Second)))
	require.Equal(t, api.ConditionStatus("False"), conditionOf(t, getCluster(t, s, c), "ApplierAvailable").Status, "the later received report counts")
	// The same report again (a retry) is accepted.
	back := postClusterStatus(t, s, c, report("applier", 1, t1, available("True"), cond("Health", "True", "")), http.StatusOK)
	postClusterStatus(t, s, c, report("applier", 1, t1, available("True"), cond("Health", "True", "")), http.StatusOK)
	transition = deref(back.JSON200.Conditions[0].LastTransitionTime)

	// A flip moves last_transition_time.
	t2 := t1.Add(10 * time.Second)
	flipped := postClusterStatus(t, s, c, report("applier", 1, t2, available("False"), cond("Health", "True", "")), http.StatusOK)
	require.True(t, deref(flipped.JSON200.Conditions[0].LastTransitionTime).After(transition))
	got = getCluster(t, s, c)
	require.Equal(t, api.ConditionStatus("False"), conditionOf(t, got, "Available").Status)
	require.Equal(t, "AdaptersUnavailable", deref(conditionOf(t, got, "Available").Reason))
	require.Contains(t, deref(conditionOf(t, got, "Available").Message), "applier")
	postClusterStatus(t, s, c, report("applier", 1, t2.Add(time.Second), available("True"), cond("Health", "True", "")), http.StatusOK)

	// A new generation: not Ready until both catch up; Available keeps the last known good.
	patched, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctx, c.Id, nil,
		api.ResourcePatch{Spec: &map[string]interface{}{"hosted_cluster": map[string]any{"infrastructure_availability_policy": "HighlyAvailable"}}})
	require.NoError(t, err)
	require.Equal(t, int64(2), patched.JSON200.Generation)
	require.Equal(t, api.ResourceStatusPhasePending, patched.JSON200.Status.Phase)
	got = getCluster(t, s, c)
	require.Equal(t, "AdaptersNotReady", deref(conditionOf(t, got, "Ready").Reason))
	require.Equal(t, api.ConditionStatus("True"), conditionOf(t, got, "Available").Status)
	require.Equal(t, int64(1), deref(conditionOf(t, got, "Available").ObservedGeneration))

	// Degraded needs Available=False and Health=False at the current generation.
	t3 := t2.Add(20 * time.Second)
	postClusterStatus(t, s, c, report("applier", 2, t3, available("False"), cond("Health", "False", "ApplyFailed")), http.StatusOK)
	require.Equal(t, api.ResourceStatusPhaseDegraded, getCluster(t, s, c).Status.Phase)
	postClusterStatus(t, s, c, report("applier", 2, t3.Add(time.Second), available("True"), cond("Health", "True", "")), http.StatusOK)
	require.Equal(t, api.ResourceStatusPhaseProgressing, getCluster(t, s, c).Status.Phase)
	postClusterStatus(t, s, c, report("version-resolver", 2, t3, available("True")), http.StatusOK)
	require.Equal(t, api.ResourceStatusPhaseReady, getCluster(t, s, c).Status.Phase)

	// An adapter nobody requires is stored and listed but changes nothing.
	before := getCluster(t, s, c)
	extra := report("observer", 2, t3, available("False"))
	extra.Data = &map[string]interface{}{"note": "watching"}
	postClusterStatus(t, s, c, extra, http.StatusCreated)
	after := getCluster(t, s, c)
	require.Equal(t, before.Status.Phase, after.Status.Phase)
	require.Equal(t, len(before.Status.Conditions), len(after.Status.Conditions))
	list, err := s.ListClusterStatusesWithResponse(ctx, c.Id)
	require.NoError(t, err)
	require.Equal(t, "AdapterStatusList", list.JSON200.Kind)
	var adapters []string
	for _, st := range list.JSON200.Items {
		adapters = append(adapters, st.Adapter)
	}
	require.Equal(t, []string{"applier", "observer", "version-resolver"}, adapters)
	require.Equal(t, map[string]interface{}{"note": "watching"}, list.JSON200.Items[1].Data)
}

func TestPUTIsIdempotentAndNodePoolsReportToo(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	c := createCluster(t, s, "host", nil)
	np := createNodePool(t, s, c, "pool", 2)
	at := time.Now().UTC().Add(-time.Second)
	body, err := json.Marshal(report("applier", 1, at, available("True")))
	require.NoError(t, err)
	for i, want := range []int{http.StatusCreated, http.StatusOK, http.StatusOK} {
		resp, err := s.PutNodePoolStatusWithBodyWithResponse(ctx, c.Id, np.Id, "application/json", strings.NewReader(string(body)))
		require.NoError(t, err)
		require.Equal(t, want, resp.StatusCode(), "put %d: %s", i, resp.Body)
	}
	got, err := s.GetNodePoolWithResponse(ctx, c.Id, np.Id)
	require.NoError(t, err)
	require.Equal(t, api.ResourceStatusPhaseReady, got.JSON200.Status.Phase)
	require.Equal(t, api.ResourceStatusPhasePending, getCluster(t, s, c).Status.Phase, "a child's report is not the parent's")
	wrong, err := s.PostNodePoolStatusWithResponse(ctx, createCluster(t, s, "other", nil).Id, np.Id, report("applier", 1, at, available("True")))
	require.NoError(t, err)
	problem(t, wrong.HTTPResponse, wrong.Body, http.StatusNotFound, "HYPERFLEET-NTF-001")
}
