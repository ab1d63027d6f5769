package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Lease mode in these tests: 12 virtual shards (3, 4 and 6 replicas share them evenly), a 3 s TTL.
const (
	testLeaseShards = 12
	testLeaseTTL    = 3 * time.Second
)

// leaseReplica is one runtime replica in lease mode that the test can stop on its own.
type leaseReplica struct {
	name   string
	stop   func()
	freeze *freezer
}

// startLeaseReplica runs a replica of the test adapter named name over VersionStreams in lease mode, its requests
// through a freezer and a recorder of its lease answers.
func startLeaseReplica(tb testing.TB, s *apiServer, name string, rec adapter.Reconciler, grants *grantLog) *leaseReplica {
	tb.Helper()
	cfg := runtimeConfig(tb, s, testAdapter)
	cfg.Replica, cfg.ShardLeases, cfg.ShardCount, cfg.ShardLeaseTTL = name, true, testLeaseShards, testLeaseTTL
	f := &freezer{base: &grantRecorder{base: s.transport, replica: name, log: grants}, thawed: make(chan struct{})}
	cfg.Transport = f
	runner, err := adapter.New(cfg, testLogger())
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx, adapter.Controller{Kind: adapter.VersionStreams(), Reconciler: rec}) }()
	var once sync.Once
	r := &leaseReplica{name: name, freeze: f}
	r.stop = func() {
		once.Do(func() {
			f.thaw()
			cancel()
			require.NoError(tb, <-done)
		})
	}
	tb.Cleanup(r.stop)
	return r
}

// freezer stands for SIGSTOP at the replica's edge: while frozen, its lease calls and status writes are held as if
// sent just before the process stopped, and reach the API only when it is thawed, whatever the replica's context
// says by then. Reads pass, so that the frozen replica goes on building reports under the leases it believes it
// holds, as a process does in the instant before it stops.
type freezer struct {
	base   http.RoundTripper
	mu     sync.Mutex
	frozen bool
	thawed chan struct{}
	once   sync.Once
	// held counts the requests held; late are the API's answers to the held status writes (status and code).
	held int
	late []string
}

func (f *freezer) setFrozen() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = false
	f.once.Do(func() { close(f.thawed) })
}

func (f *freezer) heldCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

func (f *freezer) lateAnswers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.late)
}

func (f *freezer) RoundTrip(req *http.Request) (*http.Response, error) {
	write := req.Method != http.MethodGet && (strings.HasSuffix(req.URL.Path, "/statuses") || strings.HasSuffix(req.URL.Path, "/shard-leases"))
	f.mu.Lock()
	hold := f.frozen && write
	if hold {
		f.held++
	}
	f.mu.Unlock()
	if !hold {
		return f.base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
	}
	late := req.Clone(context.WithoutCancel(req.Context()))
	late.Body = io.NopCloser(bytes.NewReader(body))
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		<-f.thawed
		resp, err := f.base.RoundTrip(late)
		if err == nil && strings.HasSuffix(req.URL.Path, "/statuses") {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
			var p api.Problem
			_ = json.Unmarshal(b, &p)
			f.mu.Lock()
			f.late = append(f.late, fmt.Sprintf("%d %s", resp.StatusCode, p.Code))
			f.mu.Unlock()
		}
		answered <- answer{resp, err}
	}()
	select {
	case a := <-answered:
		return a.resp, a.err
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// grantLog records every lease answer the API gave, in the order the replicas received them.
type grantLog struct {
	mu      sync.Mutex
	answers []grantAnswer
}

type grantAnswer struct {
	replica string
	at      time.Time // the database's clock when the answer was decided
	leases  []api.ShardLease
}

type grantRecorder struct {
	base    http.RoundTripper
	replica string
	log     *grantLog
}

func (g *grantRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/shard-leases") || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	var grant api.ShardLeaseGrant
	if err := json.Unmarshal(b, &grant); err == nil {
		g.log.mu.Lock()
		g.log.answers = append(g.log.answers, grantAnswer{replica: g.replica, at: grant.ServerTime, leases: grant.Leases})
		g.log.mu.Unlock()
	}
	return resp, nil
}

// holders returns the replicas that some answer granted a lease, sorted.
func (l *grantLog) holders() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, a := range l.answers {
		if len(a.leases) > 0 && !slices.Contains(out, a.replica) {
			out = append(out, a.replica)
		}
	}
	slices.Sort(out)
	return out
}

// overlaps checks the API's answers: for each shard, the times each replica held it (from the answer that granted
// a generation to the earlier of its last expiry and the replica's first answer without it) never overlap.
func (l *grantLog) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type span struct {
		replica    string
		generation int64
		from, to   time.Time
		open       bool
	}
	spans := map[int][]*span{} // by shard
	current := map[string]map[int]*span{}
	answers := slices.Clone(l.answers)
	slices.SortStableFunc(answers, func(a, b grantAnswer) int { return a.at.Compare(b.at) })
	for _, a := range answers {
		now := map[int]*span{}
		for _, lease := range a.leases {
			sp := current[a.replica][lease.Shard]
			if sp == nil || sp.generation != lease.Generation {
				sp = &span{replica: a.replica, generation: lease.Generation, from: a.at, open: true}
				spans[lease.Shard] = append(spans[lease.Shard], sp)
			}
			sp.to = *lease.ExpiresTime
			now[lease.Shard] = sp
		}
		for s, sp := range current[a.replica] {
			if now[s] == nil && sp.to.After(a.at) {
				sp.to = a.at // given back (or lost) by the time of this answer
			}
		}
		current[a.replica] = now
	}
	var out []string
	for s, list := range spans {
		slices.SortFunc(list, func(a, b *span) int { return int(a.generation - b.generation) })
		for i := 1; i < len(list); i++ {
			if list[i-1].replica != list[i].replica && list[i-1].to.After(list[i].from) {
				out = append(out, fmt.Sprintf("shard %d: %s held generation %d until %s, %s got generation %d at %s",
					s, list[i-1].replica, list[i-1].generation, list[i-1].to.Format(time.StampMicro), list[i].replica,
					list[i].generation, list[i].from.Format(time.StampMicro)))
			}
		}
	}
	return out
}

// tracker is the test adapter's reconciler for every replica: it counts reconciles and catches two replicas
// reconciling one resource at once.
type tracker struct {
	mu       sync.Mutex
	inflight map[string]string // resource id → replica
	twice    []string
	freeze   map[string]chan struct{}
}

func newTracker() *tracker {
	return &tracker{inflight: map[string]string{}, freeze: map[string]chan struct{}{}}
}

type trackedReplica struct {
	t    *tracker
	name string
}

func (t *tracker) replica(name string) adapter.Reconciler { return &trackedReplica{t: t, name: name} }

func (r *trackedReplica) Reconcile(ctx context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	r.t.mu.Lock()
	if other, busy := r.t.inflight[obj.ID]; busy && other != r.name {
		r.t.twice = append(r.t.twice, fmt.Sprintf("%s: %s and %s", obj.Name, other, r.name))
	}
	r.t.inflight[obj.ID] = r.name
	r.t.mu.Unlock()
	defer func() {
		r.t.mu.Lock()
		delete(r.t.inflight, obj.ID)
		r.t.mu.Unlock()
	}()
	select { // a little work, as long as the lease lasts
	case <-ctx.Done():
		return adapter.Outcome{}, ctx.Err()
	case <-time.After(10 * time.Millisecond):
	}
	return ok(obj)
}

func (r *trackedReplica) Finalize(context.Context, *adapter.Object) (adapter.Outcome, error) {
	return adapter.Outcome{Finalized: true}, nil
}

func (t *tracker) reconciledTwiceAtOnce() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.twice)
}

// holders counts the shards each replica holds in the lease table, "" for free ones.
func holders(tb testing.TB, s *apiServer) map[string]int {
	tb.Helper()
	out := map[string]int{}
	for _, h := range leaseTable(tb, s) {
		out[h]++
	}
	return out
}

// waitBalanced waits until the named replicas, and only they, hold every shard, each a fair part.
func waitBalanced(tb testing.TB, s *apiServer, within time.Duration, names ...string) {
	tb.Helper()
	n := len(names)
	var last map[string]int
	waitWithin(tb, within, fmt.Sprintf("the shards shared by %v", names), func() bool {
		last = holders(tb, s)
		total := 0
		for _, name := range names {
			if last[name] < testLeaseShards/n || last[name] > (testLeaseShards+n-1)/n {
				return false
			}
			total += last[name]
		}
		return total == testLeaseShards
	})
}

// reportedBy reports whether the test adapter reported on every stream at its current generation, and which
// replicas did.
func reportedBy(tb testing.TB, s *apiServer, streams []api.VersionStream) (bool, map[string]bool) {
	tb.Helper()
	by := map[string]bool{}
	for _, st := range streams {
		cur := streamNamed(tb, s, st.Name)
		rep := adapterReport(tb, s, cur, testAdapter)
		if rep == nil || rep.ObservedGeneration != cur.Generation {
			return false, nil
		}
		replica, _ := rep.Metadata["replica"].(string)
		by[replica] = true
	}
	return true, by
}

func createStreams(tb testing.TB, s *apiServer, n int) []api.VersionStream {
	tb.Helper()
	out := []api.VersionStream{streamNamed(tb, s, defaultStream)}
	for i := range n {
		out = append(out, *createStream(tb, s, fmt.Sprintf("fleet-%02d", i), api.VersionStreamSpec{TargetVersion: "4.16"}))
	}
	return out
}

func TestShardLeaseFrozenReplicaFailsOverAndIsFenced(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	streams := createStreams(t, s, 23)
	work, grants := newTracker(), &grantLog{}
	frozen := startLeaseReplica(t, s, "r0", work.replica("r0"), grants)
	startLeaseReplica(t, s, "r1", work.replica("r1"), grants)
	startLeaseReplica(t, s, "r2", work.replica("r2"), grants)
	waitBalanced(t, s, 30*time.Second, "r0", "r1", "r2")
	eventually(t, "every stream reported on", func() bool { done, _ := reportedBy(t, s, streams); return done })

	// SIGSTOP r0, then change every stream: r0 builds reports for its shards that reach the API only when it is
	// thawed, after its shards went to the others.
	frozen.freeze.setFrozen()
	for i, st := range streams {
		patchStream(t, s, st, fmt.Sprintf(`{"spec":{"accepted_risks":["Risk%d"]}}`, i))
	}
	eventually(t, "r0 holding its reports", func() bool { return frozen.freeze.heldCount() > 1 }) // a renewal and a report at least
	waitWithin(t, 30*time.Second, "r0's shards moved to r1 and r2", func() bool {
		h := holders(t, s)
		return h["r0"] == 0 && h["r1"]+h["r2"] == testLeaseShards
	})
	var by map[string]bool
	eventually(t, "every stream reported on at its new generation", func() bool {
		var done bool
		done, by = reportedBy(t, s, streams)
		return done
	})
	require.False(t, by["r0"], "r1 and r2 reported on r0's streams after the failover: %v", by)

	frozen.freeze.thaw()
	eventually(t, "r0's late reports answered", func() bool { return len(frozen.freeze.lateAnswers()) > 0 })
	time.Sleep(testLeaseTTL / 3) // the rest of them, if any
	for _, a := range frozen.freeze.lateAnswers() {
		require.Equal(t, "409 HYPERFLEET-CNF-008", a, "every late report of the frozen replica is fenced off")
	}

	// Thawed, r0 asks again and gets its share back.
	waitBalanced(t, s, 30*time.Second, "r0", "r1", "r2")
	require.Empty(t, grants.overlaps())
}

func TestShardLeaseScalesWithoutAStop(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	streams := createStreams(t, s, 23)
	work, grants := newTracker(), &grantLog{}
	replicas := map[string]*leaseReplica{}
	start := func(names ...string) {
		for _, n := range names {
			replicas[n] = startLeaseReplica(t, s, n, work.replica(n), grants)
		}
	}

	// Streams change all along, a spec change every 20 ms round the fleet.
	ctx, stopChanges := context.WithCancel(context.Background())
	changes := make(chan struct{})
	var changed atomic.Int64
	go func() {
		defer close(changes)
		for i := 0; ctx.Err() == nil; i++ {
			changed.Store(int64(i))
			st := streams[i%len(streams)]
			resp, err := s.PatchVersionStreamWithBodyWithResponse(ctx, st.Id, nil, "application/merge-patch+json",
				strings.NewReader(fmt.Sprintf(`{"spec":{"accepted_risks":["Change%d"]}}`, i)))
			if ctx.Err() == nil {
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	start("r0", "r1", "r2")
	waitBalanced(t, s, 30*time.Second, "r0", "r1", "r2")
	start("r3", "r4")
	waitBalanced(t, s, 30*time.Second, "r0", "r1", "r2", "r3", "r4")
	for _, n := range []string{"r0", "r1", "r2"} {
		replicas[n].stop() // SIGTERM: drains, then gives its shards back
	}
	waitBalanced(t, s, 30*time.Second, "r3", "r4")
	round := changed.Load() + int64(len(streams))
	eventually(t, "every stream changed once more", func() bool { return changed.Load() > round })
	stopChanges()
	<-changes

	var by map[string]bool
	eventually(t, "every stream reported on at its last generation", func() bool {
		var done bool
		done, by = reportedBy(t, s, streams)
		return done
	})
	// The overlap check means something only if it saw every replica hold shards (a count of answers would
	// depend on how fast the machine is).
	require.Equal(t, []string{"r0", "r1", "r2", "r3", "r4"}, grants.holders(), "the replicas' lease answers were recorded")
	require.Empty(t, grants.overlaps(), "two replicas held a shard at once")
	require.Empty(t, work.reconciledTwiceAtOnce(), "two replicas reconciled a resource at once")
	require.Subset(t, []string{"r3", "r4"}, keys(by), "the last changes were reconciled by the replicas left")
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
