package integration

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster/hypershiftsim"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

// applierFleet is the applier serving two management clusters: the API, the version resolver on a Cincinnati
// simulator, and two real kube-apiservers, each with HyperShift's CRDs and hypershift-sim, reached through a TCP
// proxy that the test can cut. The test stands in for the cluster-placer: it posts the placer's report itself.
type applierFleet struct {
	api  *apiServer
	mcs  map[string]*applierFleetMC
	pull string
	// credentials is the applier's --management-cluster-credentials: a kubeconfig per ManagementCluster.
	credentials string
}

// applierFleetMC is one management cluster of the world.
type applierFleetMC struct {
	env       *kubeenv.Env
	namespace string
	proxy     *cuttableProxy
	id        api.ManagementclusterId
}

// The management clusters of every fleet world, and how many hosted clusters each takes.
const (
	mcA        = "mc-a"
	mcB        = "mc-b"
	mcCapacity = 3
)

func startApplierFleet(tb testing.TB) *applierFleet {
	tb.Helper()
	s := startServerWith(tb, map[string][]string{"versionstream": {versionresolver.Name}, "cluster": {hostedcluster.Name},
		"managementcluster": {hostedcluster.Name}})
	sim := startSim(tb, cincinnatisim.Series{Minors: []string{"4.15", "4.16"}, Patches: 3})
	startResolver(tb, s, sim, versionresolver.Options{CincinnatiURL: sim.url(), CincinnatiTimeout: time.Second,
		RecheckAfter: 200 * time.Millisecond, RetryAfter: 200 * time.Millisecond, RolloutInterval: 200 * time.Millisecond,
		Applier: hostedcluster.Name})
	w := &applierFleet{api: s, mcs: map[string]*applierFleetMC{}, credentials: tb.TempDir(), pull: filepath.Join(tb.TempDir(), "pull-secret.json")}
	require.NoError(tb, os.WriteFile(w.pull, []byte(`{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}`), 0o600))
	for _, name := range []string{mcA, mcB} {
		env := kubeenv.Start(tb)
		m := &applierFleetMC{env: env, namespace: env.Namespace(tb, "clusters"), proxy: startCuttableProxy(tb, env.Config.Host)}
		hs := hypershiftsim.New(env.Dynamic, hypershiftsim.Options{Namespace: m.namespace, Delay: 300 * time.Millisecond,
			DeletionDelay: 200 * time.Millisecond, CreateSecrets: true, Logger: testLogger()})
		runInBackground(tb, hs.Run)
		// The applier reaches the kube-apiserver through the proxy; the proxy's address is loopback as the
		// server's is, so the serving certificate still matches.
		kubeconfig, err := clientcmd.Load(env.Kubeconfig)
		require.NoError(tb, err)
		for _, cluster := range kubeconfig.Clusters {
			cluster.Server = "https://" + m.proxy.addr()
		}
		raw, err := clientcmd.Write(*kubeconfig)
		require.NoError(tb, err)
		require.NoError(tb, os.WriteFile(filepath.Join(w.credentials, name), raw, 0o600))
		w.mcs[name] = m
		w.createManagementCluster(tb, name)
	}
	a, err := hostedcluster.NewFleet(runtimeConfig(tb, s, hostedcluster.Name), hostedcluster.Options{
		PullSecretFile: w.pull, ProgressInterval: time.Second, SyncTimeout: time.Minute, CredentialsDir: w.credentials,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 2 * time.Second, PlacementRetry: 200 * time.Millisecond,
		ManagementClusterResync: 300 * time.Millisecond,
	}, testLogger())
	require.NoError(tb, err)
	runInBackground(tb, a.Run)
	stream := createStream(tb, s, "ocp-4-16", api.VersionStreamSpec{TargetVersion: "4.16"})
	waitForReport(tb, s, *stream, "4.16.2", resolvedTo("4.16.2"))
	return w
}

// createManagementCluster creates the ManagementCluster name (its credentials file named after it), with the
// namespace of the world's member of that name if there is one.
func (w *applierFleet) createManagementCluster(tb testing.TB, name string) {
	tb.Helper()
	m := w.mcs[name]
	if m == nil {
		m = &applierFleetMC{namespace: "clusters"}
		w.mcs[name] = m
	}
	m.id = createMC(tb, w.api, name, mcCapacity, mcOptions{namespace: m.namespace}).Id
}

// placer is the adapter whose report places a cluster, and its data key, as the kind table names them.
func placer(tb testing.TB) api.ReportedReference {
	tb.Helper()
	kinds := api.Kinds()
	for _, ref := range kinds.Cluster.ReportedReferences {
		if ref.Kind.Plural == kinds.ManagementCluster.Plural {
			return ref
		}
	}
	tb.Fatal("the kind table names no placement report")
	return api.ReportedReference{}
}

// place posts the placer's report that puts c on the management cluster mc.
func (w *applierFleet) place(tb testing.TB, c *api.Cluster, mc string) {
	tb.Helper()
	ref := placer(tb)
	rep := report(ref.Adapter, c.Generation, time.Now(), cond("Available", "True", "Placed"), cond("Placed", "True", "Placed"))
	rep.Conditions[0].Message = &mc
	rep.Data = &map[string]any{ref.DataKey: mc}
	postClusterStatus(tb, w.api, c, rep, http.StatusCreated)
}

// hostedClusterOn returns whether the management cluster mc has the HostedCluster name.
func (w *applierFleet) hostedClusterOn(tb testing.TB, mc, name string) bool {
	tb.Helper()
	m := w.mcs[mc]
	_, err := m.env.Dynamic.Resource(kubeenv.HostedClusters()).Namespace(m.namespace).Get(ctxFor(tb), name, metav1.GetOptions{})
	return err == nil
}

// mcReport returns the applier's report on the management cluster mc, or nil before its first.
func (w *applierFleet) mcReport(tb testing.TB, mc string) *api.AdapterStatus {
	tb.Helper()
	resp, err := w.api.ListManagementClusterStatusesWithResponse(ctxFor(tb), w.mcs[mc].id)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	for i := range resp.JSON200.Items {
		if st := &resp.JSON200.Items[i]; st.Adapter == hostedcluster.Name && st.ObservedGeneration > 0 {
			return st
		}
	}
	return nil
}

// waitForApplier waits until the applier's report on c satisfies ok, and returns it.
func waitForApplier(tb testing.TB, s *apiServer, c *api.Cluster, what string, ok func(*api.AdapterStatus) bool) *api.AdapterStatus {
	tb.Helper()
	var st *api.AdapterStatus
	eventually(tb, c.Name+": "+what, func() bool {
		st = applierReport(tb, s, c)
		return st != nil && ok(st)
	})
	return st
}

// Each cluster lands on the management cluster its placement names, and only there; a cluster not placed yet waits
// and is applied once placed; each management cluster's report counts what it hosts; deleting a cluster deletes
// its HostedCluster on its management cluster; a management cluster nothing is placed on any more can be deleted,
// and the applier lets it go.
func TestHostedClusterFleetAppliesWherePlaced(t *testing.T) {
	w := startApplierFleet(t)

	onB := createClusterNamed(t, w.api, "lands-on-b", "ocp-4-16", nil)
	waitForApplier(t, w.api, onB, "waits for its placement", func(st *api.AdapterStatus) bool {
		return conditionIs(st, "Available", "False", hostedcluster.ReasonWaitingForPlacement)
	})
	require.False(t, w.hostedClusterOn(t, mcA, onB.Name) || w.hostedClusterOn(t, mcB, onB.Name), "nothing is applied before the placement")
	w.place(t, onB, mcB)
	onA := createClusterNamed(t, w.api, "lands-on-a", "ocp-4-16", nil)
	w.place(t, onA, mcA)

	tests := []struct {
		cluster     *api.Cluster
		mc, otherMC string
	}{
		{onA, mcA, mcB},
		{onB, mcB, mcA},
	}
	for _, tt := range tests {
		t.Run(tt.cluster.Name, func(t *testing.T) {
			waitForPhase(t, w.api, tt.cluster, api.ResourceStatusPhaseReady)
			require.True(t, w.hostedClusterOn(t, tt.mc, tt.cluster.Name), "on the management cluster its placement names")
			require.False(t, w.hostedClusterOn(t, tt.otherMC, tt.cluster.Name), "and not on the other")
			st := applierReport(t, w.api, tt.cluster)
			require.Equal(t, tt.mc, st.Data[hostedcluster.DataManagementCluster])
			require.Equal(t, w.mcs[tt.mc].namespace+"/"+tt.cluster.Name, st.Data[hostedcluster.DataHostedCluster])
		})
	}

	for _, mc := range []string{mcA, mcB} {
		var st *api.AdapterStatus
		eventually(t, mc+" reports one hosted cluster", func() bool {
			st = w.mcReport(t, mc)
			return conditionIs(st, "Available", "True", hostedcluster.ReasonServing) && deref(condition(st, "Available").Message) == "1/3 hosted clusters"
		})
		require.InDelta(t, 1, st.Data[hostedcluster.DataHostedClusters], 0)
		require.InDelta(t, mcCapacity, st.Data[hostedcluster.DataMaxHostedClusters], 0)
		require.InDelta(t, 1.0/mcCapacity, st.Data[hostedcluster.DataCapacityUsed], 1e-9)
		require.NotEmpty(t, st.Data[hostedcluster.DataKubernetesVersion]) // a build from source says v0.0.0-master
		require.True(t, conditionIs(st, hostedcluster.ConditionReachable, "True", hostedcluster.ReasonReachable))
		require.True(t, conditionIs(st, hostedcluster.ConditionHyperShiftInstalled, "True", hostedcluster.ReasonHyperShiftInstalled))
	}

	del, err := w.api.DeleteClusterWithResponse(ctxFor(t), onA.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, del.StatusCode(), "body: %s", del.Body)
	eventually(t, "the cluster removed after its HostedCluster", func() bool {
		resp, err := w.api.GetClusterWithResponse(ctxFor(t), onA.Id)
		require.NoError(t, err)
		return resp.StatusCode() == http.StatusNotFound
	})
	require.False(t, w.hostedClusterOn(t, mcA, onA.Name), "its HostedCluster is gone from its management cluster")
	require.True(t, w.hostedClusterOn(t, mcB, onB.Name), "the other management cluster's is left alone")
	eventually(t, mcA+" reports no hosted cluster", func() bool {
		st := w.mcReport(t, mcA)
		return conditionIs(st, "Available", "True", hostedcluster.ReasonServing) && deref(condition(st, "Available").Message) == "0/3 hosted clusters"
	})

	gone, err := w.api.DeleteManagementClusterWithResponse(ctxFor(t), w.mcs[mcA].id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, gone.StatusCode(), "body: %s", gone.Body)
	eventually(t, mcA+" finalized by the applier", func() bool {
		resp, err := w.api.GetManagementClusterWithResponse(ctxFor(t), w.mcs[mcA].id)
		require.NoError(t, err)
		return resp.StatusCode() == http.StatusNotFound
	})
}

// A management cluster that stops answering takes only its own clusters down: they report Available Unknown,
// ManagementClusterUnreachable, and its report says Unreachable, while the other management cluster's clusters stay
// Available and new ones are still applied there; once it answers again, its clusters are Available again.
func TestHostedClusterFleetUnreachableManagementCluster(t *testing.T) {
	w := startApplierFleet(t)
	onA := createClusterNamed(t, w.api, "stays-up", "ocp-4-16", nil)
	onB := createClusterNamed(t, w.api, "cut-off", "ocp-4-16", nil)
	w.place(t, onA, mcA)
	w.place(t, onB, mcB)
	waitForPhase(t, w.api, onA, api.ResourceStatusPhaseReady)
	waitForPhase(t, w.api, onB, api.ResourceStatusPhaseReady)

	w.mcs[mcB].proxy.cut()
	st := waitForApplier(t, w.api, onB, "reports its management cluster unreachable", func(st *api.AdapterStatus) bool {
		return conditionIs(st, "Available", "Unknown", hostedcluster.ReasonManagementClusterUnreachable)
	})
	require.Contains(t, deref(condition(st, "Available").Message), mcB, "the cause names the management cluster")
	require.Equal(t, mcB, st.Data[hostedcluster.DataManagementCluster])
	eventually(t, mcB+" reports itself unreachable", func() bool {
		st := w.mcReport(t, mcB)
		return conditionIs(st, "Available", "False", hostedcluster.ReasonUnreachable) &&
			conditionIs(st, hostedcluster.ConditionReachable, "False", hostedcluster.ReasonUnreachable)
	})

	// The other management cluster goes on: its cluster is Available, and a new one is applied there.
	require.True(t, availableIs(applierReport(t, w.api, onA), "True"))
	another := createClusterNamed(t, w.api, "still-served", "ocp-4-16", nil)
	w.place(t, another, mcA)
	waitForPhase(t, w.api, another, api.ResourceStatusPhaseReady)
	require.True(t, w.hostedClusterOn(t, mcA, another.Name))
	require.True(t, availableIs(applierReport(t, w.api, onA), "True"))

	w.mcs[mcB].proxy.restore()
	waitForApplier(t, w.api, onB, "is Available again once its management cluster answers", func(st *api.AdapterStatus) bool {
		return availableIs(st, "True")
	})
}

// A ManagementCluster whose credentials file is missing or is no kubeconfig is reported so, and so are the clusters
// placed on it; the applier goes on serving the others.
func TestHostedClusterFleetManagementClusterWithoutCredentials(t *testing.T) {
	w := startApplierFleet(t)
	tests := []struct {
		mc         string
		kubeconfig []byte // nil: no file
		reason     string
	}{
		{"no-credentials", nil, hostedcluster.ReasonCredentialsNotFound},
		{"bad-credentials", []byte("clusters: [not, a, kubeconfig"), hostedcluster.ReasonCredentialsInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.mc, func(t *testing.T) {
			if tt.kubeconfig != nil {
				require.NoError(t, os.WriteFile(filepath.Join(w.credentials, tt.mc), tt.kubeconfig, 0o600))
			}
			w.createManagementCluster(t, tt.mc)
			eventually(t, tt.mc+" reported "+tt.reason, func() bool {
				return conditionIs(w.mcReport(t, tt.mc), "Available", "False", tt.reason)
			})
			c := createClusterNamed(t, w.api, "on-"+tt.mc, "ocp-4-16", nil)
			w.place(t, c, tt.mc)
			waitForApplier(t, w.api, c, "reports "+tt.reason, func(st *api.AdapterStatus) bool {
				return conditionIs(st, "Available", "False", tt.reason) && st.Data[hostedcluster.DataManagementCluster] == tt.mc
			})
		})
	}
	served := createClusterNamed(t, w.api, "served", "ocp-4-16", nil)
	w.place(t, served, mcA)
	waitForPhase(t, w.api, served, api.ResourceStatusPhaseReady)
}

// availableIs reports whether the report's Available has that status (its reason is HyperShift's).
func availableIs(st *api.AdapterStatus, status api.ConditionStatus) bool {
	c := condition(st, "Available")
	return c != nil && c.Status == status
}

// cuttableProxy forwards connections to a target until cut: then it drops the connections it carries and refuses new
// ones (a management cluster's network gone) until restored.
type cuttableProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

// startCuttableProxy forwards a loopback port to target (host:port, or a URL's host); the test's end stops it.
func startCuttableProxy(tb testing.TB, target string) *cuttableProxy {
	tb.Helper()
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		target = u.Host
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	p := &cuttableProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.serve()
	}()
	tb.Cleanup(func() {
		_ = ln.Close()
		<-done
		p.cut()
	})
	return p
}

func (p *cuttableProxy) addr() string { return p.ln.Addr().String() }

func (p *cuttableProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			_ = in.Close()
			continue
		}
		go p.forward(in)
	}
}

// track registers a connection; false while the proxy is cut.
func (p *cuttableProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *cuttableProxy) forward(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(out) {
		_ = in.Close()
		if out != nil {
			_ = out.Close()
		}
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Add(2)
	go pipe(out, in)
	go pipe(in, out)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

// cut drops every connection and refuses new ones.
func (p *cuttableProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// restore forwards new connections again.
func (p *cuttableProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
