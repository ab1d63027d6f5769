package hostedcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperfleet/hyperfleet/internal/schedule"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/capacity"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

func TestPlacementOutcome(t *testing.T) {
	tests := []struct {
		name   string
		mc     string
		err    error
		status conditions.Status
		reason string
	}{
		{"not placed yet", "", ErrNotPlaced, conditions.False, ReasonWaitingForPlacement},
		{"unreachable: what HyperShift does is unknown", "mc-a", fmt.Errorf("%w: mc-a: %w", ErrManagementClusterUnreachable, errors.New("dial tcp: refused")),
			conditions.Unknown, ReasonManagementClusterUnreachable},
		{"its cache stale: what HyperShift does is unknown", "mc-a", fmt.Errorf("%w: mc-a: %w", ErrCacheStale, errors.New("list HostedClusters: forbidden")),
			conditions.Unknown, ReasonCacheStale},
		{"no such management cluster", "mc-a", fmt.Errorf("%w: %q", ErrManagementClusterNotFound, "mc-a"), conditions.False, ReasonManagementClusterNotFound},
		{"no credentials file", "mc-a", fmt.Errorf("%w: no file", ErrCredentialsNotFound), conditions.False, ReasonCredentialsNotFound},
		{"not a kubeconfig", "mc-a", fmt.Errorf("%w: bad yaml", ErrCredentialsInvalid), conditions.False, ReasonCredentialsInvalid},
		{"anything else", "mc-a", errors.New("the API said 503"), conditions.False, ReasonManagementCluster},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := placementOutcome(tt.mc, tt.err)
			require.Equal(t, tt.status, got.Available.Status)
			require.Equal(t, tt.reason, got.Available.Reason)
			require.Equal(t, tt.err.Error(), got.Available.Message)
			if tt.mc == "" {
				require.Nil(t, got.Data)
			} else {
				require.Equal(t, tt.mc, got.Data[DataManagementCluster])
			}
		})
	}
}

func TestCapacityUsed(t *testing.T) {
	share := capacity.ControlPlane{VCPU: DefaultControlPlaneVCPU, MemoryGiB: DefaultControlPlaneMemoryGiB}
	tests := []struct {
		name   string
		budget api.ManagementClusterCapacity
		hosted int
		want   float64
	}{
		{"empty", api.ManagementClusterCapacity{MaxHostedClusters: 4}, 0, 0},
		{"by count", api.ManagementClusterCapacity{MaxHostedClusters: 4}, 1, 0.25},
		{"vCPU is the fullest budget", api.ManagementClusterCapacity{MaxHostedClusters: 10, Vcpu: ptrTo(10)}, 1, 0.5},
		{"memory is the fullest budget", api.ManagementClusterCapacity{MaxHostedClusters: 10, Vcpu: ptrTo(100), MemoryGib: ptrTo(36)}, 1, 0.5},
		{"over: more than 1", api.ManagementClusterCapacity{MaxHostedClusters: 1}, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.InDelta(t, tt.want, capacity.BudgetOf(tt.budget).Used(tt.hosted, share), 1e-9)
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestManagementClusterOutcome(t *testing.T) {
	budget := api.ManagementClusterCapacity{MaxHostedClusters: 4}
	reachable := probeResult{reachable: true, version: "v1.37.2", hyperShift: true}
	tests := []struct {
		name                  string
		obs                   mcObservation
		available             conditions.Status
		reason, message       string
		reachable, hyperShift conditions.Status
		data                  map[string]any
	}{
		{name: "serving", obs: mcObservation{probe: reachable, synced: true, hosted: 1},
			available: conditions.True, reason: ReasonServing, message: "1/4 hosted clusters",
			reachable: conditions.True, hyperShift: conditions.True,
			data: map[string]any{DataHostedClusters: 1, DataMaxHostedClusters: 4, DataCapacityUsed: 0.25, DataKubernetesVersion: "v1.37.2"}},
		{name: "no credentials file", obs: mcObservation{credentials: fmt.Errorf("%w: no file mc-a", ErrCredentialsNotFound)},
			available: conditions.False, reason: ReasonCredentialsNotFound, message: "management cluster credentials not found: no file mc-a",
			reachable: conditions.Unknown, hyperShift: conditions.Unknown, data: map[string]any{DataMaxHostedClusters: 4}},
		{name: "credentials that are no kubeconfig", obs: mcObservation{credentials: fmt.Errorf("%w: yaml", ErrCredentialsInvalid)},
			available: conditions.False, reason: ReasonCredentialsInvalid, message: "management cluster credentials invalid: yaml",
			reachable: conditions.Unknown, hyperShift: conditions.Unknown, data: map[string]any{DataMaxHostedClusters: 4}},
		{name: "unreachable", obs: mcObservation{probe: probeResult{err: errors.New("dial tcp 127.0.0.1:1: connection refused")}},
			available: conditions.False, reason: ReasonUnreachable, message: "dial tcp 127.0.0.1:1: connection refused",
			reachable: conditions.False, hyperShift: conditions.Unknown, data: map[string]any{DataMaxHostedClusters: 4}},
		{name: "no HyperShift", obs: mcObservation{probe: probeResult{reachable: true, version: "v1.37.2"}},
			available: conditions.False, reason: ReasonHyperShiftNotInstalled,
			message:   "hypershift.openshift.io/v1beta1 does not serve hostedclusters: install HyperShift",
			reachable: conditions.True, hyperShift: conditions.False,
			data: map[string]any{DataMaxHostedClusters: 4, DataKubernetesVersion: "v1.37.2"}},
		{name: "not listed yet: no count to give", obs: mcObservation{probe: reachable},
			available: conditions.False, reason: ReasonSyncing, message: "the watch of its HostedClusters has not listed them yet",
			reachable: conditions.True, hyperShift: conditions.True,
			data: map[string]any{DataMaxHostedClusters: 4, DataKubernetesVersion: "v1.37.2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mcOutcome(budget, capacity.ControlPlane{VCPU: 5, MemoryGiB: 18}, tt.obs)
			require.Equal(t, tt.available, got.Available.Status)
			require.Equal(t, tt.reason, got.Available.Reason)
			require.Equal(t, tt.message, got.Available.Message)
			byType := map[string]conditions.Status{}
			for _, c := range got.Conditions {
				require.NotEmpty(t, c.Reason, c.Type)
				byType[c.Type] = c.Status
			}
			require.Equal(t, map[string]conditions.Status{ConditionReachable: tt.reachable, ConditionHyperShiftInstalled: tt.hyperShift}, byType)
			require.Equal(t, tt.data, got.Data)
		})
	}
}

// The name of a credentials file comes from the API: it may only name a file directly in the directory.
func TestCredentialsNameStaysInTheDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mc-a"), []byte("kubeconfig"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(dir), "outside"), []byte("secret"), 0o600))
	f := newFleet(fleetConfig{dir: dir}, nil, discard())
	tests := []struct {
		name string
		want error
	}{
		{"mc-a", nil},
		{"mc-b", ErrCredentialsNotFound},
		{"../outside", ErrCredentialsInvalid},
		{"..", ErrCredentialsInvalid},
		{".", ErrCredentialsInvalid},
		{"", ErrCredentialsInvalid},
		{"sub/mc-a", ErrCredentialsInvalid},
		{filepath.Join(dir, "mc-a"), ErrCredentialsInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := f.credentials(tt.name)
			if tt.want == nil {
				require.NoError(t, err)
				require.Equal(t, "kubeconfig", string(raw))
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeAPI answers the fleet's reads: the placer's reports by cluster id, ManagementClusters by name.
type fakeAPI struct {
	mu      sync.Mutex
	reports map[string]*adapter.Report
	mcs     map[string]*adapter.Object
	reads   int
}

func (a *fakeAPI) Report(_ context.Context, _ *adapter.Kind, _, id, _ string) (*adapter.Report, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reads++
	return a.reports[id], nil
}

func (a *fakeAPI) FindByName(_ context.Context, kind *adapter.Kind, _, name string) (*adapter.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if obj, ok := a.mcs[name]; ok {
		return obj, nil
	}
	return nil, fmt.Errorf("%s %q: %w", kind.Name, name, adapter.ErrNotFound)
}

func placerRef(t *testing.T) api.ReportedReference {
	t.Helper()
	ref, err := placement(api.Kinds())
	require.NoError(t, err)
	return ref
}

// Where a cluster goes is the placer's report, read once (placement is sticky); before the placer has reported,
// the applier's own last report still knows; with neither, the cluster is not placed.
func TestPlacementIsReadOnceAndRemembered(t *testing.T) {
	ref := placerRef(t)
	fake := &fakeAPI{reports: map[string]*adapter.Report{"placed": {Data: map[string]any{ref.DataKey: "mc-a"}}}}
	f := newFleet(fleetConfig{placer: ref}, fake, discard())
	ctx := context.Background()

	name, err := f.placementOf(ctx, &adapter.Object{ID: "placed"})
	require.NoError(t, err)
	require.Equal(t, "mc-a", name)
	fake.reports["placed"] = nil // what the placer said once stands
	name, err = f.placementOf(ctx, &adapter.Object{ID: "placed"})
	require.NoError(t, err)
	require.Equal(t, "mc-a", name)
	require.Equal(t, 1, fake.reads)

	_, err = f.placementOf(ctx, &adapter.Object{ID: "waiting"})
	require.ErrorIs(t, err, ErrNotPlaced)

	name, err = f.placementOf(ctx, &adapter.Object{ID: "known", LastReport: &adapter.Report{Data: map[string]any{DataManagementCluster: "mc-b"}}})
	require.NoError(t, err)
	require.Equal(t, "mc-b", name)

	f.Forget("placed")
	_, err = f.placementOf(ctx, &adapter.Object{ID: "placed"})
	require.ErrorIs(t, err, ErrNotPlaced, "a forgotten cluster is read again")
}

// fakePlacements places every cluster as told.
type fakePlacements struct {
	p         Placement
	err       error
	forgotten []string
}

func (f *fakePlacements) Place(context.Context, *adapter.Object) (Placement, error) {
	return f.p, f.err
}
func (f *fakePlacements) Forget(id string) { f.forgotten = append(f.forgotten, id) }

type fixedReferences struct{ stream StreamRollout }

func (r fixedReferences) Stream(context.Context, string) (StreamRollout, error) { return r.stream, nil }
func (fixedReferences) Schedule(context.Context, string) (*schedule.Schedule, error) {
	return nil, ErrScheduleNotFound
}

// A cluster whose management cluster cannot be used is reported so, and nothing is applied anywhere: not placed
// yet is a wait, an unreachable one Unknown; a cluster never placed has nothing to delete.
func TestReconcilerWithoutAUsableManagementCluster(t *testing.T) {
	ctx := context.Background()
	obj := &adapter.Object{ID: admittedID, Name: "c", Generation: 1, Spec: []byte(`{"version_stream":"s"}`)}
	newRec := func(p *fakePlacements) *Reconciler {
		rec := &Reconciler{Placements: p, References: fixedReferences{streamFixture(t)}, PullSecret: func() ([]byte, error) { return []byte("{}"), nil },
			PlacementRetry: 3 * time.Second}
		require.NoError(t, rec.Check())
		return rec
	}

	waiting := &fakePlacements{err: ErrNotPlaced}
	out, err := newRec(waiting).Reconcile(ctx, obj)
	require.NoError(t, err, "waiting for the placer is no failure")
	require.Equal(t, ReasonWaitingForPlacement, out.Available.Reason)
	require.Equal(t, 3*time.Second, out.RequeueAfter)

	unreachable := &fakePlacements{p: Placement{Name: "mc-b"}, err: fmt.Errorf("%w: mc-b: %w", ErrManagementClusterUnreachable, errors.New("refused"))}
	out, err = newRec(unreachable).Reconcile(ctx, obj)
	require.ErrorIs(t, err, adapter.ErrTransient)
	require.Equal(t, conditions.Unknown, out.Available.Status)
	require.Equal(t, ReasonManagementClusterUnreachable, out.Available.Reason)
	require.Equal(t, "mc-b", out.Data[DataManagementCluster])
	out, err = newRec(unreachable).Finalize(ctx, obj)
	require.ErrorIs(t, err, adapter.ErrTransient, "what cannot be reached cannot be deleted: retried")
	require.False(t, out.Finalized)

	out, err = newRec(waiting).Finalize(ctx, obj)
	require.NoError(t, err)
	require.True(t, out.Finalized)
}

// A member is built from the credentials file its ManagementCluster names, probed, counts the HostedClusters it
// hosts, is rebuilt when the file changes, and is dropped; the applier's report on the ManagementCluster says so.
func TestFleetMemberLifecycle(t *testing.T) {
	env := kubeenv.Start(t)
	ns := env.Namespace(t, "mc")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mc-a"), env.Kubeconfig, 0o600))

	hc := kubeenv.HostedCluster(ns, "hosted", imageA)
	hc.SetLabels(map[string]string{LabelClusterID: admittedID})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(ns).Create(ctx, hc, metav1.CreateOptions{})
	require.NoError(t, err)
	foreign := kubeenv.HostedCluster(ns, "foreign", imageA)
	_, err = env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(ns).Create(ctx, foreign, metav1.CreateOptions{})
	require.NoError(t, err)

	mc := &adapter.Object{ID: "0193a4c4-0000-7000-8000-00000000000a", Name: "mc-a",
		Spec: []byte(`{"namespace":"` + ns + `","credentials":{"kubeconfig":"mc-a"},"capacity":{"max_hosted_clusters":4}}`)}
	fake := &fakeAPI{mcs: map[string]*adapter.Object{"mc-a": mc}}
	f := newFleet(fleetConfig{placer: placerRef(t), dir: dir, qps: 20, burst: 30, probeEvery: time.Hour, probeFor: 10 * time.Second,
		transport: func(rt http.RoundTripper) http.RoundTripper { return rt },
		wake:      func(*adapter.Kind, string, string) bool { return true }, specTTL: time.Hour}, fake, discard())
	defer f.close()
	rec := &managementClusters{fleet: f, resync: time.Minute, perControlPlane: capacity.ControlPlane{VCPU: 5, MemoryGiB: 18}}

	out, err := rec.Reconcile(ctx, mc)
	require.NoError(t, err)
	require.Equal(t, conditions.True, out.Available.Status, out.Available.Message)
	require.Equal(t, "1/4 hosted clusters", out.Available.Message, "someone else's HostedCluster is no slot")
	require.Equal(t, 1, out.Data[DataHostedClusters])
	require.Equal(t, time.Minute, out.RequeueAfter)

	first, err := f.member(ctx, "mc-a")
	require.NoError(t, err)
	p, err := f.Place(ctx, &adapter.Object{ID: "c", LastReport: &adapter.Report{Data: map[string]any{DataManagementCluster: "mc-a"}}})
	require.NoError(t, err)
	require.Equal(t, Placement{Name: "mc-a", Namespace: ns, Cluster: first.kube}, p)

	// Unchanged credentials: the same member. Rotated ones (a key of the Secret rewritten): a new one.
	_, err = rec.Reconcile(ctx, mc)
	require.NoError(t, err)
	same, err := f.member(ctx, "mc-a")
	require.NoError(t, err)
	require.Same(t, first, same)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mc-a"), append(append([]byte{}, env.Kubeconfig...), '\n'), 0o600))
	_, err = rec.Reconcile(ctx, mc)
	require.NoError(t, err)
	rebuilt, err := f.member(ctx, "mc-a")
	require.NoError(t, err)
	require.NotSame(t, first, rebuilt)
	// A replica that does not reconcile the ManagementCluster reads the rotated file on its probe's tick.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mc-a"), env.Kubeconfig, 0o600))
	f.recheck("mc-a")
	again, err := f.member(ctx, "mc-a")
	require.NoError(t, err)
	require.NotSame(t, rebuilt, again)

	// A replica that does not reconcile the ManagementCluster learns on a probe tick, once its spec is old, that
	// it is gone.
	f.cfg.specTTL = 0
	fake.mu.Lock()
	delete(fake.mcs, "mc-a")
	fake.mu.Unlock()
	f.recheck("mc-a")
	f.mu.Lock()
	require.Empty(t, f.members)
	f.mu.Unlock()
	fake.mu.Lock()
	fake.mcs["mc-a"] = mc
	fake.mu.Unlock()

	// Credentials that go away: reported, and no new member is built from nothing.
	require.NoError(t, os.Remove(filepath.Join(dir, "mc-a")))
	out, err = rec.Reconcile(ctx, mc)
	require.NoError(t, err)
	require.Equal(t, ReasonCredentialsNotFound, out.Available.Reason)

	out, err = rec.Finalize(ctx, mc)
	require.NoError(t, err)
	require.True(t, out.Finalized)
	f.mu.Lock()
	require.Empty(t, f.members)
	f.mu.Unlock()
}

// NewFleet refuses a credentials directory that is not one, before it builds anything.
func TestNewFleetNeedsACredentialsDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(file, []byte("kubeconfig"), 0o600))
	tests := []struct {
		name, dir, want string
	}{
		{"none", "", "--management-cluster-credentials is required"},
		{"missing", filepath.Join(t.TempDir(), "missing"), "no such file or directory"},
		{"a file", file, "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			o.CredentialsDir = tt.dir
			_, err := NewFleet(adapter.Defaults(Name, "127.0.0.1:0"), o, discard())
			require.ErrorContains(t, err, tt.want)
		})
	}
}
