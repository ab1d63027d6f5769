package hostedcluster

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// placement returns the adapter whose report on a cluster names the ManagementCluster it is placed on, and the data
// key it names it under: the kind table says so (api.Kind.ReportedReferences), since the API refuses to delete a
// management cluster named there. The placer is another adapter, which the applier does not import.
func placement(kinds *api.KindTable) (api.ReportedReference, error) {
	for _, ref := range kinds.Cluster.ReportedReferences {
		if ref.Kind.Plural == kinds.ManagementCluster.Plural {
			return ref, nil
		}
	}
	return api.ReportedReference{}, errors.New("the kind table names no report that places a cluster on a management cluster")
}

// defaultManagementClusterNamespace is the ManagementCluster's spec.namespace when it names none (the API's default).
const defaultManagementClusterNamespace = "clusters"

// errStopping is the error of a member asked for while the applier stops.
var errStopping = errors.New("the applier is stopping")

// fleetAPI is what the fleet reads of hyperfleet-api (adapter.API).
type fleetAPI interface {
	FindByName(ctx context.Context, kind *adapter.Kind, parentID, name string) (*adapter.Object, error)
	Report(ctx context.Context, kind *adapter.Kind, parentID, id, adapter string) (*adapter.Report, error)
}

// fleetConfig is how the fleet builds and watches its members.
type fleetConfig struct {
	// placer names the placer's report and its data key (placement).
	placer     api.ReportedReference
	dir        string // --management-cluster-credentials
	qps        float32
	burst      int
	probeEvery time.Duration
	probeFor   time.Duration // each probe's timeout
	// specTTL is how old a ManagementCluster's spec may get before a probe tick reads it again.
	specTTL time.Duration
	// transport wraps each member's transport (the runner's ExternalTransport, counting calls).
	transport func(http.RoundTripper) http.RoundTripper
	// wake queues a resource for a reconcile now (the runner's Wake).
	wake func(kind *adapter.Kind, parentID, id string) bool
}

// mcSpec is what the applier knows of a ManagementCluster.
type mcSpec struct {
	id   string
	name string
	spec api.ManagementClusterSpec
	seen time.Time // when it was read
}

func (s mcSpec) namespace() string {
	if s.spec.Namespace == nil || *s.spec.Namespace == "" {
		return defaultManagementClusterNamespace
	}
	return *s.spec.Namespace
}

// fleet is the applier's management clusters: one member per ManagementCluster it has needed, each with its own
// client, rate budget, watch caches and probe. It implements Placements from the placer's reports.
type fleet struct {
	cfg fleetConfig
	api fleetAPI
	log *slog.Logger

	mu      sync.Mutex
	members map[string]*member
	specs   map[string]mcSpec
	// placed is each cluster's management cluster once known: placement is sticky, so it is read from the API once.
	placed map[string]string
	// building serialises the building of one name's member, so that a burst of reconciles builds it once.
	building map[string]*sync.Mutex
	closed   bool
}

func newFleet(cfg fleetConfig, reader fleetAPI, log *slog.Logger) *fleet {
	return &fleet{cfg: cfg, api: reader, log: log, members: map[string]*member{}, specs: map[string]mcSpec{},
		placed: map[string]string{}, building: map[string]*sync.Mutex{}}
}

var _ Placements = (*fleet)(nil)

// Place returns the member the placer's report names for obj.
func (f *fleet) Place(ctx context.Context, obj *adapter.Object) (Placement, error) {
	name, err := f.placementOf(ctx, obj)
	if err != nil {
		return Placement{}, err
	}
	m, err := f.member(ctx, name)
	if err != nil {
		return Placement{Name: name}, err
	}
	p := Placement{Name: name, Namespace: m.namespace, Cluster: m.kube}
	// The caches would go on answering what they last saw: a member that does not answer is not used at all.
	st := m.state()
	if !st.reachable {
		return p, fmt.Errorf("%w: %s: %w", ErrManagementClusterUnreachable, name, st.err)
	}
	// Nor one whose caches no longer follow it: they froze.
	return p, m.stale()
}

// Forget drops what was kept about a finalized cluster.
func (f *fleet) Forget(clusterID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.placed, clusterID)
}

// placementOf returns the name of the management cluster obj is placed on: remembered, else the placer's report,
// else the applier's own last report (which echoes the placer's; it keeps the answer across a restart even should
// the placer's report be gone); ErrNotPlaced when none names one.
func (f *fleet) placementOf(ctx context.Context, obj *adapter.Object) (string, error) {
	f.mu.Lock()
	name := f.placed[obj.ID]
	f.mu.Unlock()
	if name != "" {
		return name, nil
	}
	report, err := f.api.Report(ctx, adapter.Clusters(), "", obj.ID, f.cfg.placer.Adapter)
	if err != nil {
		return "", fmt.Errorf("read the %s's report: %w", f.cfg.placer.Adapter, err)
	}
	if name = report.DataString(f.cfg.placer.DataKey); name == "" {
		name = obj.LastReport.DataString(DataManagementCluster)
	}
	if name == "" {
		return "", ErrNotPlaced
	}
	f.mu.Lock()
	f.placed[obj.ID] = name
	f.mu.Unlock()
	return name, nil
}

// member returns the member of the management cluster name, building it when there is none yet.
func (f *fleet) member(ctx context.Context, name string) (*member, error) {
	f.mu.Lock()
	m := f.members[name]
	f.mu.Unlock()
	if m != nil {
		return m, nil
	}
	spec, err := f.spec(ctx, name)
	if err != nil {
		return nil, err
	}
	return f.ensure(ctx, spec)
}

// spec returns the ManagementCluster named name as last seen; the first time, from the API.
func (f *fleet) spec(ctx context.Context, name string) (mcSpec, error) {
	f.mu.Lock()
	s, ok := f.specs[name]
	f.mu.Unlock()
	if ok {
		return s, nil
	}
	obj, err := f.api.FindByName(ctx, api.Kinds().ManagementCluster, "", name)
	if errors.Is(err, adapter.ErrNotFound) {
		return mcSpec{}, fmt.Errorf("%w: %q", ErrManagementClusterNotFound, name)
	}
	if err != nil {
		return mcSpec{}, fmt.Errorf("read management cluster %q: %w", name, err)
	}
	if s, err = mcSpecOf(obj); err != nil {
		return mcSpec{}, err
	}
	return f.observe(s), nil
}

func mcSpecOf(obj *adapter.Object) (mcSpec, error) {
	s := mcSpec{id: obj.ID, name: obj.Name}
	if err := json.Unmarshal(obj.Spec, &s.spec); err != nil {
		return mcSpec{}, fmt.Errorf("decode management cluster %q: %w", obj.Name, err)
	}
	return s, nil
}

// observe remembers s as the ManagementCluster's latest spec and returns it.
func (f *fleet) observe(s mcSpec) mcSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.seen = time.Now()
	f.specs[s.name] = s
	return s
}

// ensure returns the member for s, built from the credentials file as it is now: the member there is when neither
// the file's content nor the namespace changed, else a new one that replaces it (whose caches the old one's
// stopping does not disturb).
func (f *fleet) ensure(ctx context.Context, s mcSpec) (*member, error) {
	f.mu.Lock()
	lock, ok := f.building[s.name]
	if !ok {
		lock = &sync.Mutex{}
		f.building[s.name] = lock
	}
	f.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()

	kubeconfig, err := f.credentials(s.spec.Credentials.Kubeconfig)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%x", sha256.Sum256(append([]byte(s.namespace()+"\n"), kubeconfig...)))
	f.mu.Lock()
	old := f.members[s.name]
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return nil, errStopping
	}
	if old != nil && old.key == key {
		return old, nil
	}
	m, err := f.build(ctx, s, kubeconfig, key)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	_, live := f.specs[s.name]
	if f.closed || !live { // stopping, or dropped while this one was built
		f.mu.Unlock()
		m.close()
		return nil, errStopping
	}
	f.members[s.name] = m
	f.mu.Unlock()
	if old != nil {
		f.log.Info("management cluster client rebuilt: its credentials or namespace changed", slog.String("management_cluster", s.name))
		old.close()
	}
	// Its clusters may have waited for it (or used the old client): look at them again.
	f.wakeClusters(s.name)
	return m, nil
}

// credentials reads the kubeconfig file name in the credentials directory. The name comes from the API, so it may
// only name a file directly in that directory.
func (f *fleet) credentials(name string) ([]byte, error) {
	if name == "" || name == "." || strings.Contains(name, "..") || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("%w: %q is not a file name in the credentials directory", ErrCredentialsInvalid, name)
	}
	raw, err := os.ReadFile(filepath.Join(f.cfg.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no file %q in %s", ErrCredentialsNotFound, name, f.cfg.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCredentialsInvalid, err)
	}
	return raw, nil
}

// build makes a member: its client from kubeconfig, its caches (started), a first probe, and the probe loop.
func (f *fleet) build(ctx context.Context, s mcSpec, kubeconfig []byte, key string) (*member, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCredentialsInvalid, s.spec.Credentials.Kubeconfig, err)
	}
	cfg = kubeClientConfig(cfg, f.cfg.qps, f.cfg.burst, f.cfg.transport)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCredentialsInvalid, s.spec.Credentials.Kubeconfig, err)
	}
	probeCfg := rest.CopyConfig(cfg)
	probeCfg.Timeout = f.cfg.probeFor
	// The probe is not rate limited (a negative QPS): a member whose client is busy applying still answers whether
	// it is up, and the probe makes two requests an interval.
	probeCfg.QPS = -1
	disco, err := discovery.NewDiscoveryClientForConfig(probeCfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCredentialsInvalid, s.spec.Credentials.Kubeconfig, err)
	}
	clusters := adapter.Clusters()
	kube, err := newKubeCluster(client, s.namespace(), func(id string) { f.cfg.wake(clusters, "", id) }, f.log.With(slog.String("management_cluster", s.name)))
	if err != nil {
		return nil, err
	}
	// A member lives until it is replaced or dropped, not as long as the reconcile that needed it first.
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	m := &member{name: s.name, key: key, namespace: s.namespace(), kube: kube, probeClient: disco.RESTClient(), stop: stop,
		done: make(chan struct{}), timeout: f.cfg.probeFor}
	kube.run(life)
	if st, _ := m.probe(life); !st.reachable {
		f.log.Warn("management cluster unreachable: its clusters report "+ReasonManagementClusterUnreachable+" until it answers",
			slog.String("management_cluster", s.name), slog.Any("error", st.err))
	}
	go m.loop(life, f.cfg.probeEvery, func(flipped bool) {
		f.probed(m, flipped)
		// Each replica reads a rotated credentials file itself (the ManagementCluster's reconciles run on one
		// replica only). A rebuild closes this member, which waits for this loop: so not from within it.
		go f.recheck(s.name)
	})
	return m, nil
}

// probed follows a probe of m: when its reachability changed, it says so in the log and wakes its clusters and its
// ManagementCluster, which report it.
func (f *fleet) probed(m *member, flipped bool) {
	if !flipped {
		return
	}
	switch st := m.state(); {
	case st.reachable && st.listErr != nil:
		f.log.Warn("the applier cannot list HostedClusters on the management cluster: its clusters report "+ReasonCacheStale+" until it can",
			slog.String("management_cluster", m.name), slog.Any("error", st.listErr))
	case st.reachable:
		f.log.Info("management cluster reachable again", slog.String("management_cluster", m.name))
	default:
		f.log.Warn("management cluster unreachable: its clusters report "+ReasonManagementClusterUnreachable+" until it answers",
			slog.String("management_cluster", m.name), slog.Any("error", st.err))
	}
	f.wakeClusters(m.name)
}

// recheck rebuilds the member of the management cluster name if its credentials file or its spec changed, and
// drops it when the ManagementCluster is gone. The ManagementCluster's own reconciles do the same, but they run on
// one replica only, and every replica has members.
func (f *fleet) recheck(name string) {
	f.mu.Lock()
	s, ok := f.specs[name]
	closed := f.closed
	f.mu.Unlock()
	if !ok || closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*f.cfg.probeFor)
	defer cancel()
	if time.Since(s.seen) > f.cfg.specTTL {
		obj, err := f.api.FindByName(ctx, api.Kinds().ManagementCluster, "", name)
		switch {
		case errors.Is(err, adapter.ErrNotFound):
			f.log.Info("management cluster gone: its client dropped", slog.String("management_cluster", name))
			f.drop(name)
			return
		case err != nil:
			f.log.Debug("management cluster not read again", slog.String("management_cluster", name), slog.Any("error", err))
		default:
			if fresh, err := mcSpecOf(obj); err == nil {
				s = f.observe(fresh)
			}
		}
	}
	if _, err := f.ensure(ctx, s); err != nil && !errors.Is(err, errStopping) {
		f.log.Debug("management cluster credentials not re-read", slog.String("management_cluster", name), slog.Any("error", err))
	}
}

// wakeClusters queues the clusters known to be on the management cluster name, and the ManagementCluster itself.
func (f *fleet) wakeClusters(name string) {
	f.mu.Lock()
	var ids []string
	for id, mc := range f.placed {
		if mc == name {
			ids = append(ids, id)
		}
	}
	s, known := f.specs[name]
	f.mu.Unlock()
	clusters := adapter.Clusters()
	for _, id := range ids {
		f.cfg.wake(clusters, "", id)
	}
	if known && s.id != "" {
		f.cfg.wake(api.Kinds().ManagementCluster, "", s.id)
	}
}

// sweepTargets returns the members there are now, for the orphan sweep.
func (f *fleet) sweepTargets() []sweepTarget {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]sweepTarget, 0, len(f.members))
	for name, m := range f.members {
		out = append(out, sweepTarget{name: name, kube: m.kube})
	}
	return out
}

// drop stops and forgets the member of the management cluster name (it is being deleted).
func (f *fleet) drop(name string) {
	f.mu.Lock()
	m := f.members[name]
	delete(f.members, name)
	delete(f.specs, name)
	f.mu.Unlock()
	if m != nil {
		m.close()
	}
}

// stale returns why the caches of some members do not follow their management clusters (their list forbidden,
// their watch failing), or nil: the applier is not ready while it has such a member.
func (f *fleet) stale() error {
	f.mu.Lock()
	members := make([]*member, 0, len(f.members))
	for _, m := range f.members {
		members = append(members, m)
	}
	f.mu.Unlock()
	slices.SortFunc(members, func(a, b *member) int { return strings.Compare(a.name, b.name) })
	var errs []error
	for _, m := range members {
		if err := m.stale(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close stops every member; no member is built after it.
func (f *fleet) close() {
	f.mu.Lock()
	f.closed = true
	members := f.members
	f.members = map[string]*member{}
	f.mu.Unlock()
	for _, m := range members {
		m.close()
	}
}

// member is one management cluster: its client and caches, and whether it answers.
type member struct {
	name, key, namespace string
	kube                 *kubeCluster
	probeClient          rest.Interface
	timeout              time.Duration
	stop                 context.CancelFunc
	done                 chan struct{} // closed when the probe loop has ended

	mu   sync.Mutex
	last probeResult
}

// probeResult is what the last probe found.
type probeResult struct {
	reachable bool
	err       error // why not reachable
	version   string
	// hyperShift is whether hypershift.openshift.io/v1beta1 serves hostedclusters.
	hyperShift bool
	// listErr is why the applier may not list the namespace's HostedClusters, as its cache must: the watch
	// that fills the cache goes on streaming after its rights are revoked, so only a new request tells.
	listErr error
}

// stale returns why m's caches no longer follow its management cluster (ErrCacheStale, wrapped), or nil: its last
// probe could not list what they hold (RBAC revoked, the CRD gone), or their watch keeps failing.
func (m *member) stale() error {
	if st := m.state(); st.reachable && st.listErr != nil {
		return fmt.Errorf("%w: %s: %w", ErrCacheStale, m.name, st.listErr)
	}
	if err := m.kube.Fresh(); err != nil {
		return fmt.Errorf("%s: %w", m.name, err)
	}
	return nil
}

func (m *member) state() probeResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// probe asks the kube-apiserver for its version and for HyperShift's API group, remembers the answer and reports
// whether reachability changed.
func (m *member) probe(ctx context.Context) (probeResult, bool) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var res probeResult
	raw, err := m.probeClient.Get().AbsPath("/version").Do(ctx).Raw()
	if err == nil {
		var v version.Info
		if err = json.Unmarshal(raw, &v); err == nil {
			res.version = v.GitVersion
		} else {
			err = fmt.Errorf("decode /version: %w", err)
		}
	}
	if err == nil {
		res.reachable = true
		res.hyperShift, err = m.servesHostedClusters(ctx)
		switch {
		case err != nil:
			res = probeResult{err: err}
		case res.hyperShift:
			res.listErr = m.mayListHostedClusters(ctx)
		}
	} else {
		res.err = err
	}
	m.mu.Lock()
	flipped := m.last.reachable != res.reachable || (m.last.listErr == nil) != (res.listErr == nil)
	m.last = res
	m.mu.Unlock()
	return res, flipped
}

// servesHostedClusters reads the discovery document of HyperShift's API group version.
func (m *member) servesHostedClusters(ctx context.Context) (bool, error) {
	gv := hostedClustersGVR.GroupVersion()
	raw, err := m.probeClient.Get().AbsPath("/apis", gv.Group, gv.Version).Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, fmt.Errorf("decode the discovery of %s: %w", gv, err)
	}
	for i := range list.APIResources {
		if list.APIResources[i].Name == hostedClustersGVR.Resource {
			return true, nil
		}
	}
	return false, nil
}

// mayListHostedClusters lists one HostedCluster of the member's namespace, as the cache's reflector would.
func (m *member) mayListHostedClusters(ctx context.Context) error {
	gv := hostedClustersGVR.GroupVersion()
	err := m.probeClient.Get().AbsPath("/apis", gv.Group, gv.Version, "namespaces", m.namespace, hostedClustersGVR.Resource).
		Param("limit", "1").Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("list HostedClusters in %s: %w", m.namespace, err)
	}
	return nil
}

// loop probes every interval until ctx ends, calling probed after each probe with whether reachability changed:
// the member's clusters, which were told it is unreachable (or used it), are then looked at again at once.
func (m *member) loop(ctx context.Context, every time.Duration, probed func(flipped bool)) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, changed := m.probe(ctx); ctx.Err() == nil {
			probed(changed)
		}
	}
}

// close stops the member's caches and probe loop and waits for them.
func (m *member) close() {
	m.stop()
	<-m.done
	m.kube.shutdown()
}
