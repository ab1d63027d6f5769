package integration

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// A filtered watch says when a resource stops matching its filter, as Kubernetes sends DELETED for an object that
// stops matching a selector: a dashboard watching `status.phase = 'Ready'` learns that a cluster is no longer
// Ready. The event is `left`, its object the resource as it now is; a resource that comes back is sent again, and
// leaving again is told again. A resource that never matched is never mentioned.
func TestFilteredWatchTellsWhenAResourceLeaves(t *testing.T) {
	s := startServer(t)
	all := watch(t, s.base, "/clusters", nil)
	ready := createCluster(t, s, "was-ready", map[string]string{"team": "core"})
	postClusterStatus(t, s, ready, report("applier", 1, time.Now().UTC(), available("True")), http.StatusCreated)
	require.Equal(t, "created", all.next().Event)
	became := all.next()
	require.Equal(t, "Ready", phaseOf(t, became.Data.Object))
	all.close()

	// The watch starts after the cluster became Ready: it learns so when it starts, not from an event.
	byPhase := watch(t, s.base, "/clusters?resource_version="+became.ID+"&search="+urlQuery("status.phase = 'Ready'"), nil)
	never := createCluster(t, s, "never-ready", nil)

	postClusterStatus(t, s, ready, report("applier", 1, time.Now().UTC(), available("False")), http.StatusOK)
	e := byPhase.next()
	require.Equal(t, "left", e.Event)
	require.Equal(t, "left", string(e.Data.Type))
	require.Equal(t, ready.Id, e.Data.Id)
	require.NotEqual(t, "Ready", phaseOf(t, e.Data.Object), "the object is the resource as it now is")
	require.Equal(t, "was-ready", objectName(t, e.Data.Object))

	// Back in: an ordinary event with the resource; out again: told again.
	postClusterStatus(t, s, ready, report("applier", 1, time.Now().UTC(), available("True")), http.StatusOK)
	e = byPhase.next()
	require.Equal(t, "status", e.Event)
	require.Equal(t, "Ready", phaseOf(t, e.Data.Object))
	postClusterStatus(t, s, ready, report("applier", 1, time.Now().UTC(), available("False")), http.StatusOK)
	require.Equal(t, "left", byPhase.next().Event)
	// Out and staying out: nothing more to tell.
	postClusterStatus(t, s, ready, report("applier", 1, time.Now().UTC(), available("False"), cond("Health", "False", "")), http.StatusOK)
	byPhase.quiet(300 * time.Millisecond)
	require.NotNil(t, never)

	// A label filter, watched from a list's position: the list showed the cluster, so the watch must say it left.
	list, err := s.ListClustersWithResponse(ctxFor(t), &api.ListClustersParams{Search: ptr("labels.team = 'core'")})
	require.NoError(t, err)
	require.Equal(t, []string{"was-ready"}, names(list.JSON200.Items))
	byLabel := watch(t, s.base, "/clusters?resource_version="+list.JSON200.ResourceVersion+"&search="+urlQuery("labels.team = 'core'"), nil)
	patched, err := s.PatchClusterWithApplicationMergePatchPlusJSONBodyWithResponse(ctxFor(t), ready.Id, nil,
		api.ResourcePatch{Labels: &map[string]*string{"team": ptr("edge")}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patched.StatusCode(), "body: %s", patched.Body)
	e = byLabel.next()
	require.Equal(t, "left", e.Event)
	require.Equal(t, ready.Id, e.Data.Id)
	var object struct {
		Labels map[string]string `json:"labels"`
	}
	require.NoError(t, json.Unmarshal(e.Data.Object, &object))
	require.Equal(t, "edge", object.Labels["team"])
	byLabel.quiet(300 * time.Millisecond)
}

func phaseOf(tb testing.TB, object json.RawMessage) string {
	tb.Helper()
	var o struct {
		Status struct {
			Phase string `json:"phase"`
		} `json:"status"`
	}
	require.NoError(tb, json.Unmarshal(object, &o))
	return o.Status.Phase
}
