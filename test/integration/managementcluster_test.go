package integration

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// The adapters of the placement loop as the API knows them: the placer reports a cluster's management cluster
// under data.management_cluster, which the kind table declares a reported reference.
const (
	placerAdapter  = "cluster-placer"
	applierAdapter = "hostedcluster-applier"
)

// placementReport is the placer's report that c is placed on mc.
func placementReport(generation int64, mc string) api.AdapterStatusReport {
	rep := report(placerAdapter, generation, time.Now(), available("True"))
	rep.Data = &map[string]any{"management_cluster": mc}
	return rep
}

func TestManagementClusterSpecIsDefaultedValidatedAndImmutableWhereItSays(t *testing.T) {
	s := startServerWith(t, map[string][]string{"cluster": {placerAdapter}, "managementcluster": {applierAdapter}})
	ctx := ctxFor(t)
	mc := createMC(t, s, "mc-a", 2, mcOptions{labels: map[string]string{"tier": "gold"}})
	require.Equal(t, "clusters", deref(mc.Spec.Namespace), "the namespace defaults to HyperShift's conventional one")
	require.True(t, deref(mc.Spec.Schedulable), "a new management cluster is schedulable")
	require.Equal(t, "Pending", string(mc.Status.Phase), "Ready only once the applier reports it")

	for _, tc := range []struct {
		name, body, field string
	}{
		{"no capacity", `{"name": "mc-x", "spec": {"credentials": {"kubeconfig": "mc-x"}}}`, "spec.capacity"},
		{"zero capacity", `{"name": "mc-x", "spec": {"capacity": {"max_hosted_clusters": 0}, "credentials": {"kubeconfig": "mc-x"}}}`, "spec.capacity.max_hosted_clusters"},
		{"a path for credentials", `{"name": "mc-x", "spec": {"capacity": {"max_hosted_clusters": 1}, "credentials": {"kubeconfig": "../etc/passwd"}}}`, "spec.credentials.kubeconfig"},
		{"a kubeconfig inline", `{"name": "mc-x", "spec": {"capacity": {"max_hosted_clusters": 1}, "credentials": {"kubeconfig": "mc-x", "token": "secret"}}}`, "spec.credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.CreateManagementClusterWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(tc.body))
			require.NoError(t, err)
			p := problem(t, resp.HTTPResponse, resp.Body, http.StatusBadRequest, "HYPERFLEET-VAL-002")
			require.Contains(t, fmt.Sprint(p.Errors), tc.field)
		})
	}

	// Cordoning is a spec change; the namespace is not.
	patch, err := s.PatchManagementClusterWithBodyWithResponse(ctx, mc.Id, nil, "application/merge-patch+json", strings.NewReader(`{"spec": {"schedulable": false}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patch.StatusCode(), "body: %s", patch.Body)
	require.False(t, deref(patch.JSON200.Spec.Schedulable))
	patch, err = s.PatchManagementClusterWithBodyWithResponse(ctx, mc.Id, nil, "application/merge-patch+json", strings.NewReader(`{"spec": {"namespace": "elsewhere"}}`))
	require.NoError(t, err)
	problem(t, patch.HTTPResponse, patch.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-007")

	// A cluster's placement is for good.
	spec := clusterSpec(defaultStream)
	spec.Placement = &api.ClusterPlacement{Region: ptr("us-east-1"), ManagementClusterSelector: &map[string]string{"tier": "gold"}}
	c, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "placed", Spec: spec})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, c.StatusCode(), "body: %s", c.Body)
	cp, err := s.PatchClusterWithBodyWithResponse(ctx, c.JSON201.Id, nil, "application/merge-patch+json", strings.NewReader(`{"spec": {"placement": {"region": "eu-west-1"}}}`))
	require.NoError(t, err)
	problem(t, cp.HTTPResponse, cp.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-007")
}

func TestAManagementClusterWithClustersPlacedOnItCannotBeDeleted(t *testing.T) {
	s := startServerWith(t, map[string][]string{"cluster": {placerAdapter}})
	ctx := ctxFor(t)
	mcA := createMC(t, s, "mc-a", 10, mcOptions{})

	var clusters []*api.Cluster
	for i := range 5 {
		c := createCluster(t, s, fmt.Sprintf("placed-%d", i), nil)
		clusters = append(clusters, c)
		postClusterStatus(t, s, c, placementReport(c.Generation, "mc-a"), http.StatusCreated)
	}

	t.Run("a report naming no live management cluster is refused", func(t *testing.T) {
		c := createCluster(t, s, "nowhere", nil)
		resp, err := s.PostClusterStatusWithResponse(ctx, c.Id, placementReport(c.Generation, "mc-nope"))
		require.NoError(t, err)
		p := problem(t, resp.HTTPResponse, resp.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-006")
		require.Contains(t, deref(p.Detail), `no live ManagementCluster is named "mc-nope"`)
	})

	t.Run("deleting a hosting management cluster is 409 with the count", func(t *testing.T) {
		del, err := s.DeleteManagementClusterWithResponse(ctx, mcA.Id)
		require.NoError(t, err)
		p := problem(t, del.HTTPResponse, del.Body, http.StatusConflict, "HYPERFLEET-CNF-005")
		require.Contains(t, deref(p.Detail), "still has 5 Cluster(s) on it")
		require.Contains(t, deref(p.Detail), "placed-0, placed-1, placed-2 and 2 more")
		got, err := s.GetManagementClusterWithResponse(ctx, mcA.Id)
		require.NoError(t, err)
		require.Nil(t, got.JSON200.DeletedTime, "nothing was marked")
	})

	t.Run("a deleting cluster still counts until it is removed", func(t *testing.T) {
		for _, c := range clusters {
			resp, err := s.DeleteClusterWithResponse(ctx, c.Id)
			require.NoError(t, err)
			require.Equal(t, http.StatusAccepted, resp.StatusCode())
		}
		del, err := s.DeleteManagementClusterWithResponse(ctx, mcA.Id)
		require.NoError(t, err)
		problem(t, del.HTTPResponse, del.Body, http.StatusConflict, "HYPERFLEET-CNF-005")
		for _, c := range clusters {
			gone := getCluster(t, s, c)
			rep := placementReport(gone.Generation, "mc-a")
			rep.Conditions = append(rep.Conditions, cond("Finalized", "True", ""))
			postClusterStatus(t, s, c, rep, http.StatusOK)
		}
		del, err = s.DeleteManagementClusterWithResponse(ctx, mcA.Id)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, del.StatusCode(), "body: %s", del.Body)
	})

	t.Run("a placement racing a delete: exactly one wins", func(t *testing.T) {
		// A new, empty management cluster each time: a report placing a cluster on it and its delete go at once.
		for i := range 10 {
			c := createCluster(t, s, fmt.Sprintf("racer-%d", i), nil)
			mc := createMC(t, s, fmt.Sprintf("mc-race-%d", i), 1, mcOptions{})
			var wg sync.WaitGroup
			var placed, deleted int
			wg.Go(func() {
				resp, err := s.PostClusterStatusWithResponse(ctx, c.Id, placementReport(c.Generation, mc.Name))
				require.NoError(t, err)
				placed = resp.StatusCode()
			})
			wg.Go(func() {
				resp, err := s.DeleteManagementClusterWithResponse(ctx, mc.Id)
				require.NoError(t, err)
				deleted = resp.StatusCode()
			})
			wg.Wait()
			okPlaced, okDeleted := placed == http.StatusCreated, deleted == http.StatusAccepted
			require.True(t, okPlaced != okDeleted, "exactly one of the placement (%d) and the delete (%d) wins", placed, deleted)
		}
	})

	t.Run("the count is served by the index", func(t *testing.T) {
		var plan []string
		// A table this small is read any way at equal cost; what matters is that the planner can use the index, so
		// the other ways are taken away inside a transaction that is rolled back.
		rollback := fmt.Errorf("roll back")
		err := harnessDB(t, s).Transaction(func(tx *gorm.DB) error {
			for _, stmt := range []string{"SET LOCAL enable_seqscan = off", "DROP INDEX adapter_statuses_report_time", "DROP INDEX adapter_statuses_pending"} {
				if err := tx.Exec(stmt).Error; err != nil {
					return err
				}
			}
			if err := tx.Raw(`EXPLAIN SELECT r.name, count(*) OVER () FROM adapter_statuses s JOIN clusters r ON r.id = s.resource_id
				WHERE s.kind = 'Cluster' AND s.adapter = 'cluster-placer' AND s.data->>'management_cluster' = 'mc-a'`).Scan(&plan).Error; err != nil {
				return err
			}
			return rollback
		})
		require.ErrorIs(t, err, rollback)
		require.Contains(t, strings.Join(plan, "\n"), "adapter_statuses_management_cluster")
	})
}
