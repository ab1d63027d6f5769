package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// fakeAPI is hyperfleet-api as the placer reads it: resources by kind, in id order, with adapters' reports.
type fakeAPI struct {
	mu        sync.Mutex
	resources map[string][]*fakeResource // by kind plural
	pageSize  int
	// failList, failReport fail every call of that kind.
	failList, failReport error
	// duringIDs runs inside IDs, after the ids were read: what happens while the list is on its way.
	duringIDs func()
	lists     map[string]int // by kind plural
	// blockList, when set, holds every list of management clusters until it is closed; inList says one is held.
	blockList chan struct{}
	inList    bool
}

func (f *fakeAPI) listing() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inList
}

type fakeResource struct {
	listed adapter.Listed
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{resources: map[string][]*fakeResource{}, pageSize: 2, lists: map[string]int{}}
}

func (f *fakeAPI) add(kind *adapter.Kind, it adapter.Listed) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if it.Reports == nil {
		it.Reports = map[string]*adapter.Report{}
	}
	f.resources[kind.Plural] = append(f.resources[kind.Plural], &fakeResource{listed: it})
	slices.SortFunc(f.resources[kind.Plural], func(a, b *fakeResource) int {
		return compareStrings(a.listed.ID, b.listed.ID)
	})
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *fakeAPI) report(kind *adapter.Kind, id, adapterName string, r *adapter.Report) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, res := range f.resources[kind.Plural] {
		if res.listed.ID == id {
			res.listed.Reports[adapterName] = r
			return
		}
	}
	panic("no " + kind.Plural + " " + id)
}

func (f *fakeAPI) remove(kind *adapter.Kind, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resources[kind.Plural] = slices.DeleteFunc(f.resources[kind.Plural], func(r *fakeResource) bool { return r.listed.ID == id })
}

func (f *fakeAPI) List(_ context.Context, kind *adapter.Kind, _ string, q adapter.ListQuery) (*adapter.ListPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if block := f.blockList; block != nil && kind.Plural == "managementclusters" {
		// Held after the page is read: what changes meanwhile is not in it.
		defer func() {
			f.inList = true
			f.mu.Unlock()
			<-block
			f.mu.Lock()
			f.inList = false
		}()
	}
	f.lists[kind.Plural]++
	if f.failList != nil {
		return nil, f.failList
	}
	page := &adapter.ListPage{}
	for _, res := range f.resources[kind.Plural] {
		it := res.listed
		if it.ID <= q.After || (it.Deleting && !q.IncludeDeleted) {
			continue
		}
		if len(page.Items) == f.pageSize {
			page.Next = page.Items[len(page.Items)-1].ID
			break
		}
		reports := map[string]*adapter.Report{}
		for _, a := range q.Statuses {
			if r := it.Reports[a]; r != nil {
				reports[a] = r
			}
		}
		it.Reports = reports
		page.Items = append(page.Items, it)
	}
	return page, nil
}

func (f *fakeAPI) Report(_ context.Context, kind *adapter.Kind, _, id, adapterName string) (*adapter.Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failReport != nil {
		return nil, f.failReport
	}
	for _, res := range f.resources[kind.Plural] {
		if res.listed.ID == id {
			return res.listed.Reports[adapterName], nil
		}
	}
	return nil, &adapter.APIError{Op: "get report", Status: 404}
}

func (f *fakeAPI) IDs(_ context.Context, kind *adapter.Kind) (map[string]bool, error) {
	f.mu.Lock()
	out := map[string]bool{}
	for _, res := range f.resources[kind.Plural] {
		out[res.listed.ID] = true
	}
	during := f.duringIDs
	f.mu.Unlock()
	if during != nil {
		during()
	}
	return out, nil
}

// addMC registers a management cluster, reachable unless edit says otherwise.
func (f *fakeAPI) addMC(tb testing.TB, name string, spec api.ManagementClusterSpec, labels map[string]string, reachable bool) {
	tb.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(tb, err)
	it := adapter.Listed{ID: "mc-id-" + name, Name: name, Labels: labels, Generation: 1, Spec: raw}
	f.add(api.Kinds().ManagementCluster, it)
	if reachable {
		f.report(api.Kinds().ManagementCluster, it.ID, DefaultApplier, &adapter.Report{ObservedGeneration: 1,
			Conditions: []conditions.Condition{{Type: conditions.Available, Status: conditions.True, Reason: "Reachable"}}})
	}
}

// mcWithRoom is a management cluster spec with room for n hosted clusters.
func mcWithRoom(n int) api.ManagementClusterSpec {
	return api.ManagementClusterSpec{Capacity: api.ManagementClusterCapacity{MaxHostedClusters: n},
		Credentials: api.ManagementClusterCredentials{Kubeconfig: "kc"}}
}

// addCluster registers a cluster and returns it as the runtime would hand it to the reconciler.
func (f *fakeAPI) addCluster(tb testing.TB, id string, placement *api.ClusterPlacement) *adapter.Object {
	tb.Helper()
	raw, err := json.Marshal(map[string]any{"version_stream": "stable-4-16", "placement": placement})
	require.NoError(tb, err)
	f.add(adapter.Clusters(), adapter.Listed{ID: id, Name: "cluster-" + id, Generation: 1, Spec: raw})
	return &adapter.Object{Kind: "Cluster", ID: id, Name: "cluster-" + id, Generation: 1, Spec: raw}
}

func newReconciler(f *fakeAPI) *Reconciler {
	return &Reconciler{API: f, Adapter: Name, Applier: DefaultApplier, ControlPlane: ControlPlane{VCPU: 5, MemoryGiB: 18}}
}

// reconcile runs Reconcile and stores its report in the fake, as the runtime would post it.
func reconcile(tb testing.TB, r *Reconciler, f *fakeAPI, obj *adapter.Object) adapter.Outcome {
	tb.Helper()
	out, err := r.Reconcile(context.Background(), obj)
	require.NoError(tb, err)
	f.report(adapter.Clusters(), obj.ID, Name, reportOf(out))
	obj.LastReport = reportOf(out)
	return out
}

// reportOf is the report the API would store for out (the conditions the placer reads back, and the data).
func reportOf(out adapter.Outcome) *adapter.Report {
	r := &adapter.Report{ObservedGeneration: 1, Data: out.Data}
	av := out.Available
	r.Conditions = append(r.Conditions, conditions.Condition{Type: conditions.Available, Status: av.Status, Reason: av.Reason, Message: av.Message})
	for _, c := range out.Conditions {
		r.Conditions = append(r.Conditions, conditions.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	if out.Finalized {
		r.Conditions = append(r.Conditions, conditions.Condition{Type: conditions.Finalized, Status: conditions.True})
	}
	return r
}

func placedOn(out adapter.Outcome) string {
	if out.Available.Status != conditions.True {
		return ""
	}
	return out.Available.Message
}

func TestReconcilePlacesOnceAndForAll(t *testing.T) {
	f := newFakeAPI()
	f.addMC(t, "mc-a", mcWithRoom(2), nil, true)
	f.addMC(t, "mc-b", mcWithRoom(4), nil, true)
	r := newReconciler(f)

	one := f.addCluster(t, "c1", nil)
	out := reconcile(t, r, f, one)
	require.Equal(t, "mc-a", placedOn(out))
	require.Equal(t, map[string]any{DataManagementCluster: "mc-a", DataRegion: ""}, out.Data)
	require.Equal(t, []string{"Placed/True/Placed"}, conds(out))
	require.Zero(t, out.RequeueAfter)

	two := f.addCluster(t, "c2", nil)
	require.Equal(t, "mc-b", placedOn(reconcile(t, r, f, two)), "mc-a is half used, mc-b empty")

	// Cordoned, unreachable, even gone from the list: a placement never changes.
	f.remove(api.Kinds().ManagementCluster, "mc-id-mc-a")
	for range 3 {
		require.Equal(t, "mc-a", placedOn(reconcile(t, r, f, one)))
	}
	require.Equal(t, map[string]int{"mc-a": 1, "mc-b": 1}, r.Placed())
}

func conds(out adapter.Outcome) []string {
	var s []string
	for _, c := range out.Conditions {
		s = append(s, c.Type+"/"+string(c.Status)+"/"+c.Reason)
	}
	return s
}

func TestReconcileSaysWhyNothingFits(t *testing.T) {
	f := newFakeAPI()
	r := newReconciler(f)
	r.RetryInterval = 7
	c := f.addCluster(t, "c1", &api.ClusterPlacement{Region: ptr("us-east-1"), ManagementClusterSelector: &map[string]string{"tier": "gold"}})

	out := reconcile(t, r, f, c)
	require.Equal(t, conditions.False, out.Available.Status)
	require.Equal(t, ReasonNoCapacity, out.Available.Reason)
	require.Equal(t, "no management cluster is registered", out.Available.Message)
	require.EqualValues(t, 7, out.RequeueAfter)

	gold := map[string]string{"tier": "gold"}
	region := func(r string) api.ManagementClusterSpec { s := mcWithRoom(5); s.Region = &r; return s }
	full := region("us-east-1")
	full.Capacity.MaxHostedClusters = 1
	f.addMC(t, "mc-a", full, gold, true)
	cordoned := region("us-east-1")
	cordoned.Schedulable = ptr(false)
	f.addMC(t, "mc-b", cordoned, gold, true)
	f.addMC(t, "mc-c", region("eu-west-1"), gold, true)
	f.addMC(t, "mc-d", region("us-east-1"), gold, false)
	f.report(api.Kinds().ManagementCluster, "mc-id-mc-d", DefaultApplier, &adapter.Report{ObservedGeneration: 1,
		Conditions: []conditions.Condition{{Type: conditions.Available, Status: conditions.False, Reason: "CredentialsNotFound"}}})
	f.addMC(t, "mc-e", region("us-east-1"), map[string]string{"tier": "silver"}, true)
	f.addMC(t, "mc-f", region("us-east-1"), gold, false) // never reported on
	// Fill mc-a with another cluster.
	other := f.addCluster(t, "c0", &api.ClusterPlacement{ManagementClusterSelector: &map[string]string{"tier": "gold"}})
	require.Equal(t, "mc-a", placedOn(reconcile(t, r, f, other)))

	out = reconcile(t, r, f, c)
	require.Equal(t, "no management cluster fits: mc-a: full (1/1 hosted clusters); mc-b: cordoned; "+
		"mc-c: in region eu-west-1, not us-east-1; mc-d: not reachable (CredentialsNotFound); mc-e: labels do not match; "+
		"mc-f: not reachable (not reported by hostedcluster-applier)", out.Available.Message)
	require.Equal(t, []string{"Placed/False/NoCapacity"}, conds(out))
	require.Nil(t, out.Data)

	// Capacity appears: the next try places it.
	f.addMC(t, "mc-g", region("us-east-1"), gold, true)
	require.Equal(t, "mc-g", placedOn(reconcile(t, r, f, c)))
}

// Clusters reconciled at once by many workers never take more slots than there are: the decision and the ledger
// share one lock.
func TestReconcileNeverOvershoots(t *testing.T) {
	f := newFakeAPI()
	f.addMC(t, "mc-a", mcWithRoom(5), nil, true)
	f.addMC(t, "mc-b", mcWithRoom(7), nil, true)
	withBudget := mcWithRoom(100)
	withBudget.Capacity.Vcpu = ptr(40) // 8 control planes of 5 vCPU
	f.addMC(t, "mc-c", withBudget, nil, true)
	r := newReconciler(f)

	const clusters = 30
	objs := make([]*adapter.Object, clusters)
	for i := range objs {
		objs[i] = f.addCluster(t, fmt.Sprintf("c%02d", i), nil)
	}
	outs := make([]adapter.Outcome, clusters)
	var wg sync.WaitGroup
	for i := range objs {
		wg.Go(func() {
			out, err := r.Reconcile(context.Background(), objs[i])
			if err == nil {
				outs[i] = out
			}
		})
	}
	wg.Wait()
	got := map[string]int{}
	for _, out := range outs {
		if name := placedOn(out); name != "" {
			got[name]++
		} else {
			require.Equal(t, ReasonNoCapacity, out.Available.Reason)
			got["none"]++
		}
	}
	require.Equal(t, map[string]int{"mc-a": 5, "mc-b": 7, "mc-c": 8, "none": 10}, got)
	require.Equal(t, map[string]int{"mc-a": 5, "mc-b": 7, "mc-c": 8}, r.Placed())
}

// Decisions that ask for the management clusters while a list is in flight share the next list, which starts
// after they asked: none acts on a list older than itself.
func TestDecisionsShareTheNextList(t *testing.T) {
	f := newFakeAPI()
	f.addMC(t, "mc-a", mcWithRoom(10), nil, true)
	r := newReconciler(f)
	require.NoError(t, r.EnsureLedger(context.Background()))
	release := make(chan struct{})
	f.blockList = release

	first := make(chan []Candidate)
	go func() {
		got, err := r.candidates(context.Background())
		assert.NoError(t, err)
		first <- got
	}()
	waitFor(t, func() bool { return f.listing() })
	f.addMC(t, "mc-b", mcWithRoom(10), nil, true) // after the first list started
	later := make(chan []Candidate, 2)
	for range 2 {
		go func() {
			got, err := r.candidates(context.Background())
			assert.NoError(t, err)
			later <- got
		}()
	}
	waitFor(t, func() bool {
		r.listMu.Lock()
		defer r.listMu.Unlock()
		return r.pending != nil && r.pending.joined == 2
	})
	close(release)
	require.Equal(t, []string{"mc-a"}, names(<-first))
	require.Equal(t, []string{"mc-a", "mc-b"}, names(<-later))
	require.Equal(t, []string{"mc-a", "mc-b"}, names(<-later))
	require.Equal(t, 2, f.lists["managementclusters"], "one list for the first, one for the two that came later")
}

func names(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// waitFor polls cond until it holds; the test's own deadline bounds it.
func waitFor(tb testing.TB, cond func() bool) {
	tb.Helper()
	for !cond() {
		time.Sleep(time.Millisecond)
	}
}

// After a restart the ledger is what the placer's reports say: placements (deleting clusters' included) count,
// finalized ones do not, and clusters left unplaced are woken.
func TestReconcileRebuildsTheLedgerFromItsReports(t *testing.T) {
	f := newFakeAPI()
	f.addMC(t, "mc-a", mcWithRoom(3), nil, true)
	onA := &adapter.Report{ObservedGeneration: 1, Data: map[string]any{DataManagementCluster: "mc-a", DataRegion: ""},
		Conditions: []conditions.Condition{{Type: conditions.Available, Status: conditions.True, Reason: ReasonPlaced}}}
	f.addCluster(t, "c1", nil)
	f.report(adapter.Clusters(), "c1", Name, onA)
	f.add(adapter.Clusters(), adapter.Listed{ID: "c2", Name: "deleting", Deleting: true, Spec: json.RawMessage(`{}`)})
	f.report(adapter.Clusters(), "c2", Name, onA)
	f.add(adapter.Clusters(), adapter.Listed{ID: "c3", Name: "finalized", Deleting: true, Spec: json.RawMessage(`{}`)})
	f.report(adapter.Clusters(), "c3", Name, &adapter.Report{ObservedGeneration: 2, Data: onA.Data,
		Conditions: []conditions.Condition{{Type: conditions.Finalized, Status: conditions.True}}})
	f.addCluster(t, "c4", nil)
	f.report(adapter.Clusters(), "c4", Name, reportOf(noCapacity([]string{"mc-a: full (3/3 hosted clusters)"}, 1)))
	f.addCluster(t, "c5", nil) // never reported on: pending in the API, no need to wake it
	f.addCluster(t, "c6", nil)
	f.report(adapter.Clusters(), "c6", "someone-else", onA) // another adapter's data is not a placement

	r := newReconciler(f)
	var woken []string
	r.Wake = func(id string) { woken = append(woken, id) }
	require.NoError(t, r.EnsureLedger(context.Background()))
	require.Equal(t, map[string]int{"mc-a": 2}, r.Placed())
	require.Equal(t, []string{"c4"}, woken)
	lists := f.lists["clusters"]
	require.NoError(t, r.EnsureLedger(context.Background()))
	require.Equal(t, lists, f.lists["clusters"], "rebuilt once")

	require.Equal(t, "mc-a", placedOn(reconcile(t, r, f, objectOf(t, f, "c4"))))
	out := reconcile(t, r, f, objectOf(t, f, "c5"))
	require.Equal(t, "no management cluster fits: mc-a: full (3/3 hosted clusters)", out.Available.Message)
}

// The ledger is rebuilt before the first decision even when nothing started it, and a failed rebuild decides
// nothing.
func TestReconcileRebuildsBeforeItsFirstDecision(t *testing.T) {
	f := newFakeAPI()
	f.addMC(t, "mc-a", mcWithRoom(1), nil, true)
	f.addCluster(t, "c1", nil)
	f.report(adapter.Clusters(), "c1", Name, reportOf(placed(Placement{ManagementCluster: "mc-a"})))
	c2 := f.addCluster(t, "c2", nil)
	r := newReconciler(f)

	f.failList = errors.New("connection refused")
	out, err := r.Reconcile(context.Background(), c2)
	require.ErrorIs(t, err, adapter.ErrTransient)
	require.Equal(t, ReasonLedgerUnavailable, out.Available.Reason)
	require.Equal(t, conditions.False, out.Available.Status)
	require.Nil(t, r.Placed())

	f.failList = nil
	out = reconcile(t, r, f, c2)
	require.Equal(t, "no management cluster fits: mc-a: full (1/1 hosted clusters)", out.Available.Message)
}

func objectOf(tb testing.TB, f *fakeAPI, id string) *adapter.Object {
	tb.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, res := range f.resources[adapter.Clusters().Plural] {
		if res.listed.ID == id {
			return &adapter.Object{Kind: "Cluster", ID: id, Name: res.listed.Name, Generation: 1, Spec: res.listed.Spec,
				LastReport: res.listed.Reports[Name]}
		}
	}
	tb.Fatalf("no cluster %s", id)
	return nil
}

func TestFinalize(t *testing.T) {
	applierReport := func(finalized bool) *adapter.Report {
		r := &adapter.Report{ObservedGeneration: 2, Conditions: []conditions.Condition{
			{Type: conditions.Available, Status: conditions.False, Reason: "HostedClusterDeleting"}}}
		if finalized {
			r.Conditions = append(r.Conditions, conditions.Condition{Type: conditions.Finalized, Status: conditions.True})
		} else {
			r.Conditions = append(r.Conditions, conditions.Condition{Type: conditions.Finalized, Status: conditions.False})
		}
		return r
	}
	tests := []struct {
		name       string
		placed     bool
		applier    *adapter.Report
		gone       bool  // the cluster is gone from the API
		reportErr  error // reading the applier's report fails
		wantReason string
		wantFinal  bool
		wantErr    bool
		wantLeft   int // clusters left on mc-a
	}{
		{name: "applier finalized", placed: true, applier: applierReport(true), wantReason: ReasonReleased, wantFinal: true},
		{name: "applier still removing", placed: true, applier: applierReport(false), wantReason: ReasonWaitingForHostedClusterRemoval, wantLeft: 1},
		{name: "applier never reported", placed: true, wantReason: ReasonReleased, wantFinal: true},
		{name: "cluster gone", placed: true, gone: true, wantReason: ReasonReleased, wantFinal: true},
		{name: "applier's report unreadable", placed: true, reportErr: errors.New("timeout"),
			wantReason: ReasonWaitingForHostedClusterRemoval, wantErr: true, wantLeft: 1},
		{name: "never placed", applier: applierReport(false), wantReason: ReasonNeverPlaced, wantFinal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPI()
			f.addMC(t, "mc-a", mcWithRoom(5), nil, true)
			r := newReconciler(f)
			r.FinalizeInterval = 9
			obj := f.addCluster(t, "c1", nil)
			if tt.placed {
				require.Equal(t, "mc-a", placedOn(reconcile(t, r, f, obj)))
			} else {
				require.NoError(t, r.EnsureLedger(context.Background()))
			}
			f.report(adapter.Clusters(), "c1", DefaultApplier, tt.applier)
			if tt.gone {
				f.remove(adapter.Clusters(), "c1")
			}
			f.failReport = tt.reportErr
			obj.Generation = 2
			out, err := r.Finalize(context.Background(), obj)
			require.Equal(t, tt.wantErr, err != nil, "error: %v", err)
			require.Equal(t, tt.wantReason, out.Available.Reason)
			require.Equal(t, conditions.False, out.Available.Status)
			require.Equal(t, tt.wantFinal, out.Finalized)
			require.Equal(t, tt.wantLeft, r.Placed()["mc-a"])
			if tt.placed {
				// The applier still finds where to remove the HostedCluster from.
				require.Equal(t, "mc-a", out.Data[DataManagementCluster])
			}
			if tt.wantReason == ReasonWaitingForHostedClusterRemoval && !tt.wantErr {
				require.EqualValues(t, 9, out.RequeueAfter)
			}
		})
	}
}

// A finalize after the slot was freed (the cluster waits on other adapters) says the same again, and does not free
// the slot twice.
func TestFinalizeAgainAfterTheSlotWasFreed(t *testing.T) {
	f := newFakeAPI()
	f.addMC(t, "mc-a", mcWithRoom(5), nil, true)
	r := newReconciler(f)
	one, two := f.addCluster(t, "c1", nil), f.addCluster(t, "c2", nil)
	reconcile(t, r, f, one)
	reconcile(t, r, f, two)
	out, err := r.Finalize(context.Background(), one)
	require.NoError(t, err)
	require.Equal(t, ReasonReleased, out.Available.Reason)
	one.LastReport = reportOf(out)

	out, err = r.Finalize(context.Background(), one)
	require.NoError(t, err)
	require.True(t, out.Finalized)
	require.Equal(t, ReasonReleased, out.Available.Reason)
	require.Equal(t, "mc-a", out.Data[DataManagementCluster])
	require.Equal(t, map[string]int{"mc-a": 1}, r.Placed())
}

// A prune drops the placements of clusters the API no longer has, but never one made after it listed the clusters.
func TestPrune(t *testing.T) {
	f := newFakeAPI()
	f.addMC(t, "mc-a", mcWithRoom(10), nil, true)
	r := newReconciler(f)
	n, err := r.Prune(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "nothing to prune before the ledger is built")

	for i := range 3 {
		reconcile(t, r, f, f.addCluster(t, "c"+strconv.Itoa(i), nil))
	}
	f.remove(adapter.Clusters(), "c1") // force-deleted
	f.duringIDs = func() {
		// Created and placed while the ids were on their way: not in them, and not to be dropped.
		reconcile(t, r, f, f.addCluster(t, "c9", nil))
	}
	n, err = r.Prune(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, map[string]int{"mc-a": 3}, r.Placed())
	r.mu.Lock()
	_, kept := r.ledger.get("c9")
	_, dropped := r.ledger.get("c1")
	r.mu.Unlock()
	require.True(t, kept)
	require.False(t, dropped)
}

func TestReconcileRefusesAnUnreadablePlacement(t *testing.T) {
	f := newFakeAPI()
	r := newReconciler(f)
	obj := &adapter.Object{ID: "c1", Spec: json.RawMessage(`{"placement":{"region":7}}`)}
	out, err := r.Reconcile(context.Background(), obj)
	require.ErrorIs(t, err, adapter.ErrTerminal)
	require.Equal(t, ReasonInvalidSpec, out.Available.Reason)
}

func TestCheck(t *testing.T) {
	good := func() *Reconciler { return newReconciler(newFakeAPI()) }
	tests := []struct {
		name string
		edit func(*Reconciler)
		want string
	}{
		{"complete", func(*Reconciler) {}, ""},
		{"no API", func(r *Reconciler) { r.API = nil }, "no API reader"},
		{"no adapter name", func(r *Reconciler) { r.Adapter = "" }, "adapter name"},
		{"bad applier name", func(r *Reconciler) { r.Applier = "Applier" }, "applier"},
		{"free control planes", func(r *Reconciler) { r.ControlPlane.VCPU = 0 }, "at least 1 vCPU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good()
			tt.edit(r)
			err := r.Check()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestCandidateOf(t *testing.T) {
	spec := func(s api.ManagementClusterSpec) json.RawMessage {
		raw, err := json.Marshal(s)
		require.NoError(t, err)
		return raw
	}
	withAll := mcWithRoom(80)
	withAll.Region, withAll.Schedulable = ptr("us-east-1"), ptr(false)
	withAll.Capacity.Vcpu, withAll.Capacity.MemoryGib = ptr(400), ptr(1440)
	available := func(s conditions.Status, reason string) map[string]*adapter.Report {
		return map[string]*adapter.Report{DefaultApplier: {Conditions: []conditions.Condition{{Type: conditions.Available, Status: s, Reason: reason}}}}
	}
	tests := []struct {
		name string
		it   adapter.Listed
		want Candidate
	}{
		{
			name: "every field",
			it:   adapter.Listed{Name: "mc-a", Labels: map[string]string{"a": "b"}, Spec: spec(withAll), Reports: available(conditions.True, "Reachable")},
			want: Candidate{Name: "mc-a", Region: "us-east-1", Labels: map[string]string{"a": "b"}, Cordoned: true, Reachable: true,
				Capacity: Capacity{MaxHostedClusters: 80, VCPU: 400, MemoryGiB: 1440}},
		},
		{
			name: "schedulable by default",
			it:   adapter.Listed{Name: "mc-a", Spec: spec(mcWithRoom(3)), Reports: available(conditions.True, "")},
			want: Candidate{Name: "mc-a", Reachable: true, Capacity: Capacity{MaxHostedClusters: 3}},
		},
		{
			name: "schedulable said",
			it: adapter.Listed{Name: "mc-a", Spec: json.RawMessage(`{"schedulable":true,"capacity":{"max_hosted_clusters":3}}`),
				Reports: available(conditions.True, "")},
			want: Candidate{Name: "mc-a", Reachable: true, Capacity: Capacity{MaxHostedClusters: 3}},
		},
		{
			name: "unreachable",
			it:   adapter.Listed{Name: "mc-a", Spec: spec(mcWithRoom(3)), Reports: available(conditions.False, "Unreachable")},
			want: Candidate{Name: "mc-a", Unreachable: "Unreachable", Capacity: Capacity{MaxHostedClusters: 3}},
		},
		{
			name: "unknown without a reason",
			it:   adapter.Listed{Name: "mc-a", Spec: spec(mcWithRoom(3)), Reports: available(conditions.Unknown, "")},
			want: Candidate{Name: "mc-a", Unreachable: "Available=Unknown", Capacity: Capacity{MaxHostedClusters: 3}},
		},
		{
			name: "not reported",
			it:   adapter.Listed{Name: "mc-a", Spec: spec(mcWithRoom(3)), Reports: map[string]*adapter.Report{}},
			want: Candidate{Name: "mc-a", Unreachable: "not reported by hostedcluster-applier", Capacity: Capacity{MaxHostedClusters: 3}},
		},
		{
			name: "deleting",
			it:   adapter.Listed{Name: "mc-a", Deleting: true, Spec: spec(mcWithRoom(3)), Reports: available(conditions.True, "")},
			want: Candidate{Name: "mc-a", Deleting: true, Reachable: true, Capacity: Capacity{MaxHostedClusters: 3}},
		},
		{
			name: "unreadable spec",
			it:   adapter.Listed{Name: "mc-a", Spec: json.RawMessage(`{"capacity":"lots"}`)},
			want: Candidate{Name: "mc-a", Invalid: "json: cannot unmarshal string into Go struct field ManagementClusterSpec.capacity of type api.ManagementClusterCapacity"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, candidateOf(&tt.it, DefaultApplier))
		})
	}
}

func TestWantOf(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want Want
	}{
		{"no placement", `{"version_stream":"s"}`, Want{ControlPlane: cp}},
		{"empty spec", ``, Want{ControlPlane: cp}},
		{"region", `{"placement":{"region":"us-east-1"}}`, Want{Region: "us-east-1", ControlPlane: cp}},
		{"selector", `{"placement":{"management_cluster_selector":{"tier":"gold"}}}`,
			Want{Selector: map[string]string{"tier": "gold"}, ControlPlane: cp}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wantOf(json.RawMessage(tt.spec), cp)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// The data key the placer reports is the one the API reads to refuse deleting a management cluster in use.
func TestDataKeyIsTheAPIsReportedReference(t *testing.T) {
	kinds := api.Kinds()
	require.Contains(t, kinds.Cluster.ReportedReferences,
		api.ReportedReference{Adapter: Name, DataKey: DataManagementCluster, Kind: kinds.ManagementCluster})
}

func ptr[T any](v T) *T { return &v }
