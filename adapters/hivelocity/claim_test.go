package hivelocity

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hivelocitysim"
	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// tagDelay is how long the simulator hides a tag write in these tests; claimSettle covers it (see claimBudget:
// δ up to 300 ms) and leaves each loopback check and write 200 ms, ample even on a loaded machine (a claim that
// overran would only fail, not break the proof, but these tests count on a winner).
const (
	tagDelay    = 60 * time.Millisecond
	claimSettle = time.Second
)

// claimEnv is a simulator that delays tag writes, on the real clock.
type claimEnv struct {
	sim *hivelocitysim.Simulator
	url string
	key string
}

func newClaimEnv(tb testing.TB, devices int) *claimEnv {
	tb.Helper()
	sim := hivelocitysim.New(hivelocitysim.Options{APIKeys: []string{"k"}})
	for i := range devices {
		require.NoError(tb, sim.Seed(hivelocitysim.Device{ID: int32(1000 + i), LocationName: "LAX2", ProductID: hivelocitysim.DemoProductWorker, //nolint:gosec // small
			Tags: []string{TagUseAllow, LabelPrefix + LabelDeviceType + "=s1"}}))
	}
	require.NoError(tb, sim.SetFault(hivelocitysim.Fault{Kind: hivelocitysim.FaultDelayedTagWrites, Delay: tagDelay}))
	srv := httptest.NewServer(sim.Handler())
	tb.Cleanup(srv.Close)
	key := filepath.Join(tb.TempDir(), "key")
	require.NoError(tb, os.WriteFile(key, []byte("k"), 0o600))
	return &claimEnv{sim: sim, url: srv.URL, key: key}
}

// replica returns a reconciler as one provisioner replica would have it, with its own client and notes.
func (e *claimEnv) replica(tb testing.TB) *Reconciler {
	tb.Helper()
	client, err := hvclient.New(hvclient.Config{URL: e.url, APIKeyFile: e.key, Timeout: 5 * time.Second})
	require.NoError(tb, err)
	s := DefaultSettings()
	s.ClaimSettle, s.ListTTL = claimSettle, 10*time.Millisecond
	r, err := NewReconciler(client, s, nil, nil)
	require.NoError(tb, err)
	return r
}

// claimPass returns a pass of pool on r, as a reconcile would start it.
func claimPass(r *Reconciler, pool string) *pass {
	p := Pool{ID: pool, Name: "w", ClusterID: cluster, Cluster: "c", Domain: "example.com", Replicas: 1,
		Req: Requirements{DeviceType: "s1", Region: "LAX2"}, OSName: "Ubuntu 22.x", Spec: spec}
	return r.newPass(&adapter.Object{ID: pool, ParentID: cluster, Spec: json.RawMessage(`{}`)}, p, false)
}

// race runs the claims at once, each after a random delay within twice the tag delay (so that some checks come
// before and some after other claims' writes show), and returns the devices each claim won.
func race(tb testing.TB, claims []func(ctx context.Context) []*member) [][]*member {
	tb.Helper()
	out := make([][]*member, len(claims))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, claim := range claims {
		wg.Go(func() {
			<-start
			time.Sleep(time.Duration(rand.Int64N(int64(2 * tagDelay)))) //nolint:gosec // jitter
			out[i] = claim(context.Background())
		})
	}
	close(start)
	wg.Wait()
	return out
}

// Pools of several replicas claim one device at once, while tag writes take a while to show: exactly one claim
// wins, and the device carries that claim.
func TestClaimIsExactlyOnce(t *testing.T) {
	for round := range 8 {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			e := newClaimEnv(t, 1)
			var claims []func(ctx context.Context) []*member
			pools := map[int]string{}
			for i := range 6 {
				r := e.replica(t)
				pools[i] = fmt.Sprintf("pool-%d", i%3) // three pools of two replicas
				claims = append(claims, func(ctx context.Context) []*member {
					p := claimPass(r, pools[i])
					return p.claim(ctx, []claimTarget{{slot: 0, dev: hvclient.Device{ID: 1000}}})
				})
			}
			won := race(t, claims)
			var winners []*member
			for _, w := range won {
				winners = append(winners, w...)
			}
			require.Len(t, winners, 1, "claims won: %v", won)
			time.Sleep(2 * tagDelay) // every write has shown
			d, ok := e.sim.Device(1000)
			require.True(t, ok)
			got, owned := ownershipOf(d.Tags)
			require.True(t, owned)
			require.True(t, winners[0].own.Claim.Equal(got.Claim), "the device carries the winning claim")
			require.Equal(t, winners[0].own.NodePool, got.NodePool)
		})
	}
}

// Replicas of one pool claim different devices for the same slot at once: one keeps the slot, the others yield
// and untag their device.
func TestClaimYieldsASlotClaimedEarlier(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			e := newClaimEnv(t, 3)
			var claims []func(ctx context.Context) []*member
			for i := range 3 {
				r := e.replica(t)
				claims = append(claims, func(ctx context.Context) []*member {
					p := claimPass(r, poolA)
					return p.claim(ctx, []claimTarget{{slot: 0, dev: hvclient.Device{ID: int32(1000 + i)}}}) //nolint:gosec // small
				})
			}
			won := race(t, claims)
			var winners []*member
			for _, w := range won {
				winners = append(winners, w...)
			}
			require.Len(t, winners, 1, "claims won: %v", won)
			time.Sleep(2 * tagDelay)
			for _, d := range e.sim.Devices() {
				own, owned := ownershipOf(d.Tags)
				if d.ID == winners[0].dev.ID {
					require.True(t, winners[0].own.Claim.Equal(own.Claim))
					continue
				}
				require.False(t, owned, "device %d keeps a claim that yielded: %v", d.ID, d.Tags)
			}
		})
	}
}

// A device another pool owns, or that an operator gave up on, is not claimed, whatever the list said.
func TestClaimChecksTheDeviceAfresh(t *testing.T) {
	e := newClaimEnv(t, 2)
	require.NoError(t, e.sim.Seed(hivelocitysim.Device{ID: 1000, LocationName: "LAX2", ProductID: hivelocitysim.DemoProductWorker,
		Tags: []string{TagUseAllow, LabelPrefix + LabelDeviceType + "=s1", KeyNodePool + "=other"}},
		hivelocitysim.Device{ID: 1001, LocationName: "LAX2", ProductID: hivelocitysim.DemoProductWorker,
			Tags: []string{TagUseAllow, LabelPrefix + LabelDeviceType + "=s1", KeyPermanentError + "=broken"}}))
	p := claimPass(e.replica(t), poolA)
	won := p.claim(context.Background(), []claimTarget{{slot: 0, dev: hvclient.Device{ID: 1000}}, {slot: 1, dev: hvclient.Device{ID: 1001}}})
	require.Empty(t, won)
	for _, r := range e.sim.Requests() {
		require.NotEqual(t, hivelocitysim.OpPutTags, r.Op, "a tag write for an ineligible device")
	}
}

func TestDeviceCacheSharesOneList(t *testing.T) {
	e := newClaimEnv(t, 3)
	r := e.replica(t)
	r.devices.ttl = time.Hour
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			snap, err := r.devices.get(context.Background())
			require.NoError(t, err)
			require.Len(t, snap.devices, 3)
		})
	}
	wg.Wait()
	lists := func() int { return len(e.sim.RequestsFor(0)) }
	require.Equal(t, 1, lists(), "twenty reconciles, one list")
	_, err := r.devices.get(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, lists())
	r.devices.invalidate()
	_, err = r.devices.get(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, lists(), "a write makes the next reconcile look again")
	_, err = r.devices.fresh(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, lists())
}

// slowTagWrites delays the answer of every tag write (after the simulator applied it) by delay.
type slowTagWrites struct {
	base  http.RoundTripper
	delay time.Duration
}

func (s slowTagWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(req)
	if err == nil && req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/tags") {
		time.Sleep(s.delay)
	}
	return resp, err
}

// A claim whose write came back later than its budget proves nothing: it is not trusted, and the device it tagged
// is untagged for a later claim.
func TestClaimWhoseWriteOverranIsNotTrusted(t *testing.T) {
	e := newClaimEnv(t, 1)
	client, err := hvclient.New(hvclient.Config{URL: e.url, APIKeyFile: e.key, Timeout: 5 * time.Second,
		Transport: slowTagWrites{base: http.DefaultTransport, delay: budgetOf(claimSettle).Write + 50*time.Millisecond}})
	require.NoError(t, err)
	s := DefaultSettings()
	s.ClaimSettle, s.ListTTL = claimSettle, 10*time.Millisecond
	r, err := NewReconciler(client, s, nil, nil)
	require.NoError(t, err)
	won := claimPass(r, poolA).claim(context.Background(), []claimTarget{{slot: 0, dev: hvclient.Device{ID: 1000}}})
	require.Empty(t, won)
	var writes [][]string
	for _, req := range e.sim.RequestsFor(1000) {
		if req.Op == hivelocitysim.OpPutTags {
			writes = append(writes, req.Tags)
		}
	}
	require.Len(t, writes, 2, "the claim, then its release")
	_, claimed := ownershipOf(writes[0])
	_, still := ownershipOf(writes[1])
	require.True(t, claimed)
	require.False(t, still, "the untrusted claim was untagged: %v", writes[1])
}
