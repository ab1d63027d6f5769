// Package hypershiftsim simulates the HyperShift operator, as far as a client of HostedClusters can see it, for
// development and tests where no HyperShift runs.
//
// A Simulator watches hypershift.openshift.io/v1beta1 HostedClusters (in one namespace or all) and, like the
// operator:
//   - adds the finalizer hypershift.openshift.io/finalizer to each new HostedCluster;
//   - reports a rollout of spec.release.image: a Partial entry on top of status.version.history, Progressing=True,
//     Available=False until the first rollout completes; after Options.Delay the entry turns Completed, the
//     cluster Available, and status gains controlPlaneEndpoint, kubeconfig and kubeadminPassword;
//   - reports each new spec.release.image as an upgrade the same way (Available stays True);
//   - when told a release fails (Options.Failures), leaves its rollout Partial, with Degraded=True or silently
//     stuck, on every HostedCluster or a stable share of them;
//   - on deletion, removes its finalizer after Options.DeletionDelay so that the object goes away.
//
// Status goes through the status subresource and passes the real CRD's validation. Conditions, reasons and
// messages are HyperShift's (see status.go). It does not run control planes, NodePools or anything else.
package hypershiftsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

const (
	// Finalizer is the finalizer HyperShift's hostedcluster controller puts on every HostedCluster and removes
	// once the cluster's resources are cleaned up (hypershift-operator/controllers/hostedcluster).
	Finalizer = "hypershift.openshift.io/finalizer"

	// FieldManager is the field manager of every write the simulator makes.
	FieldManager = "hypershift-sim"

	// DefaultDelay is the rollout time the hypershift-sim binary uses unless told otherwise.
	DefaultDelay = 5 * time.Second

	// DefaultDeletionDelay is the deletion time the hypershift-sim binary uses unless told otherwise.
	DefaultDeletionDelay = 2 * time.Second

	// DefaultVersion is the version reported for a release image whose tag names none when Options.Version is
	// empty.
	DefaultVersion = "0.0.0-unknown"

	// workers is how many HostedClusters are reconciled at once.
	workers = 2
)

// HostedClusters returns the resource the simulator watches.
func HostedClusters() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "hypershift.openshift.io", Version: "v1beta1", Resource: "hostedclusters"}
}

func secrets() schema.GroupVersionResource {
	return schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
}

// Options configures a Simulator. The zero value is usable: all namespaces, rollouts and deletions completed on
// the next reconcile, the real clock, and no logs.
type Options struct {
	// Namespace limits the simulator to HostedClusters in one namespace; empty means all namespaces.
	Namespace string
	// Delay is how long each rollout of a release image stays Partial before it turns Completed. Zero completes
	// it on the reconcile after the one that reported it Partial.
	Delay time.Duration
	// DeletionDelay is how long after the simulator first sees a HostedCluster's deletion it removes its
	// finalizer.
	DeletionDelay time.Duration
	// Version is reported for release images whose tag names no version, e.g. images pinned by digest; empty
	// means DefaultVersion.
	Version string
	// CreateSecrets makes the simulator create the admin kubeconfig and kubeadmin-password Secrets that the
	// status points at (and delete them before letting the HostedCluster go), as HyperShift does; without it
	// the status names Secrets that do not exist.
	CreateSecrets bool
	// Failures makes releases fail to roll out (FailDegraded, FailStuck), on all HostedClusters or a share; it may
	// change while the simulator runs. Nil fails nothing.
	Failures *Failures
	// Clock times rollouts and deletions; nil means the real clock. Tests pass a fake clock and step it.
	Clock clock.WithDelayedExecution
	// Logger receives a JSON-friendly record, with the HostedCluster's namespace and name, for every transition
	// and every failed reconcile; nil discards them.
	Logger *slog.Logger
}

// Simulator stands in for the HyperShift operator. Build it with New and start it with Run.
type Simulator struct {
	client dynamic.Interface
	opts   Options
	// ready is true while a Run has its cache synced and its workers running.
	ready atomic.Bool
}

// New returns a simulator that works through client with opts. It does nothing until Run.
func New(client dynamic.Interface, opts Options) *Simulator {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = DefaultVersion
	}
	return &Simulator{client: client, opts: opts}
}

// Run simulates HyperShift until ctx is done, then stops its workers and returns nil. It returns an error at once
// if the client is nil or HostedClusters cannot be listed (typically: the HyperShift CRD is not installed).
// Run may be called more than once, but two runs on one cluster and namespace fight over the same objects.
func (s *Simulator) Run(ctx context.Context) error {
	if s.client == nil {
		return errors.New("hypershiftsim: nil dynamic client")
	}
	if _, err := s.client.Resource(HostedClusters()).Namespace(s.opts.Namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("hypershiftsim: listing HostedClusters (is the HyperShift CRD installed?): %w", err)
	}

	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(s.client, 0, s.opts.Namespace, nil)
	informer := factory.ForResource(HostedClusters())
	c := &controller{
		Simulator: s,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "hypershift-sim"}),
		lister:   informer.Lister(),
		timers:   map[string]clock.Timer{},
		deleting: map[string]time.Time{},
	}
	defer c.stop()
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.gone,
	}); err != nil {
		return fmt.Errorf("hypershiftsim: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return nil // ctx ended before the first list arrived
	}
	s.ready.Store(true)
	defer s.ready.Store(false)
	s.opts.Logger.Info("simulating HyperShift", "namespace", s.opts.Namespace, "delay", s.opts.Delay.String(),
		"deletion_delay", s.opts.DeletionDelay.String(), "create_secrets", s.opts.CreateSecrets)

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	s.opts.Logger.Info("stopped")
	return nil
}

// Ready reports whether a Run has listed the HostedClusters and is simulating HyperShift for them.
func (s *Simulator) Ready() bool { return s.ready.Load() }

// controller is the state of one Run.
type controller struct {
	*Simulator
	queue  workqueue.TypedRateLimitingInterface[string]
	lister cache.GenericLister

	mu sync.Mutex
	// timers wake a HostedCluster when its rollout or deletion is due, one per key.
	timers map[string]clock.Timer
	// deleting holds when the simulator first saw each HostedCluster's deletion, on its own clock: the API
	// server's deletionTimestamp is on another clock than a test's fake one.
	deleting map[string]time.Time
}

func (c *controller) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// gone forgets a HostedCluster that no longer exists.
func (c *controller) gone(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.mu.Lock()
	_, wasDeleting := c.deleting[key]
	delete(c.deleting, key)
	if t, ok := c.timers[key]; ok {
		t.Stop()
		delete(c.timers, key)
	}
	c.mu.Unlock()
	if wasDeleting {
		ns, name := splitKey(key)
		c.opts.Logger.Info("HostedCluster deleted", "namespace", ns, "name", name)
	}
}

// wakeAfter queues key again after d on the simulator's clock, replacing any earlier wake-up.
func (c *controller) wakeAfter(key string, d time.Duration) {
	if d <= 0 {
		c.queue.Add(key)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.timers[key]; ok {
		t.Stop()
	}
	c.timers[key] = c.opts.Clock.AfterFunc(d, func() { c.queue.Add(key) })
}

func (c *controller) stop() {
	c.queue.ShutDown()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		t.Stop()
	}
}

func (c *controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	err := c.reconcile(ctx, key)
	switch {
	case err == nil:
		c.queue.Forget(key)
	case ctx.Err() != nil:
	default:
		ns, name := splitKey(key)
		level := slog.LevelWarn
		if apierrors.IsConflict(err) {
			level = slog.LevelDebug // the cache was behind a write; the retry sees the new object
		}
		c.opts.Logger.Log(ctx, level, "reconcile failed; retrying", "namespace", ns, "name", name, "error", err)
		c.queue.AddRateLimited(key)
	}
	return true
}

func (c *controller) reconcile(ctx context.Context, key string) error {
	ns, name := splitKey(key)
	obj, err := c.lister.ByNamespace(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	hc, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	log := c.opts.Logger.With("namespace", ns, "name", name)
	if hc.GetDeletionTimestamp() != nil {
		return c.finalize(ctx, key, hc, log)
	}
	if !slices.Contains(hc.GetFinalizers(), Finalizer) {
		if hc, err = c.setFinalizers(ctx, hc, append(slices.Clone(hc.GetFinalizers()), Finalizer)); err != nil {
			return ignoreNotFound(err)
		}
		log.Info("added finalizer", "finalizer", Finalizer)
	}
	return c.report(ctx, key, hc, log)
}

// report writes the status HyperShift would show now, if it differs from the current one, and arranges to look
// again when a rollout is due.
func (c *controller) report(ctx context.Context, key string, hc *unstructured.Unstructured, log *slog.Logger) error {
	in, err := parse(hc)
	if err != nil {
		log.Error("cannot read HostedCluster; leaving it alone", "error", err)
		return nil
	}
	if in.Spec.Release.Image == "" {
		log.Error("HostedCluster has no spec.release.image; leaving it alone")
		return nil
	}
	var cur status
	if raw, ok := hc.Object["status"].(map[string]any); ok {
		if err := fromMap(raw, &cur); err != nil {
			log.Error("cannot read HostedCluster status; leaving it alone", "error", err)
			return nil
		}
	}

	failing := func(version string) FailMode { return c.opts.Failures.modeFor(in.Namespace, in.Name, version) }
	st := nextStatus(cur, in, c.opts.Clock.Now(), c.opts.Delay, c.opts.Version, failing)
	if !equality.Semantic.DeepEqual(cur, st.status) {
		if c.opts.CreateSecrets && cur.KubeConfig == nil && st.status.KubeConfig != nil {
			if err := c.createSecrets(ctx, hc, *st.status.ControlPlaneEndpoint); err != nil {
				return err
			}
		}
		updated := hc.DeepCopy()
		if err := mergeStatus(updated, st.status); err != nil {
			return err
		}
		if _, err := c.client.Resource(HostedClusters()).Namespace(hc.GetNamespace()).
			UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			return ignoreNotFound(err)
		}
		if r := st.started; r != nil {
			log.Info("rollout started", "image", r.Image, "version", r.Version, "state", r.State)
		}
		if st.failed == FailDegraded {
			log.Info("rollout degraded", "image", in.Spec.Release.Image, "reason", ReasonReleaseFailed)
		}
		if r := st.completed; r != nil {
			log.Info("rollout completed", "image", r.Image, "version", r.Version, "state", r.State,
				"available", true, "api_endpoint", fmt.Sprintf("%s:%d", st.status.ControlPlaneEndpoint.Host,
					st.status.ControlPlaneEndpoint.Port))
		}
	}
	if st.wait {
		c.wakeAfter(key, st.after)
	}
	return nil
}

// finalize removes the simulator's finalizer DeletionDelay after it first saw hc being deleted.
func (c *controller) finalize(ctx context.Context, key string, hc *unstructured.Unstructured, log *slog.Logger) error {
	if !slices.Contains(hc.GetFinalizers(), Finalizer) {
		return nil // not ours to finish, or already finished
	}
	now := c.opts.Clock.Now()
	c.mu.Lock()
	seen, ok := c.deleting[key]
	if !ok {
		seen = now
		c.deleting[key] = now
	}
	c.mu.Unlock()
	if !ok {
		log.Info("deletion seen", "finalizer_removed_in", c.opts.DeletionDelay.String())
	}
	if due := seen.Add(c.opts.DeletionDelay); now.Before(due) {
		c.wakeAfter(key, due.Sub(now))
		return nil
	}
	if c.opts.CreateSecrets {
		if err := c.deleteSecrets(ctx, hc); err != nil {
			return err
		}
	}
	rest := slices.DeleteFunc(slices.Clone(hc.GetFinalizers()), func(f string) bool { return f == Finalizer })
	if _, err := c.setFinalizers(ctx, hc, rest); err != nil {
		return ignoreNotFound(err)
	}
	log.Info("removed finalizer", "finalizer", Finalizer, "remaining_finalizers", len(rest))
	return nil
}

// setFinalizers replaces hc's finalizers with a merge patch that carries hc's resourceVersion, so that it fails
// with a conflict rather than drop a finalizer someone else added since hc was read.
func (c *controller) setFinalizers(ctx context.Context, hc *unstructured.Unstructured, finalizers []string) (*unstructured.Unstructured, error) {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": hc.GetResourceVersion(), "finalizers": finalizers,
	}})
	if err != nil {
		return nil, err
	}
	return c.client.Resource(HostedClusters()).Namespace(hc.GetNamespace()).
		Patch(ctx, hc.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
}

// splitKey splits a queue key. Keys come from MetaNamespaceKeyFunc, so they always split; anything else is taken
// as the name of a cluster-scoped object, which the lister then does not find.
func splitKey(key string) (namespace, name string) {
	if ns, n, err := cache.SplitMetaNamespaceKey(key); err == nil {
		return ns, n
	}
	return "", key
}

// parse reads the part of hc the simulator needs.
func parse(hc *unstructured.Unstructured) (hostedCluster, error) {
	out := hostedCluster{Namespace: hc.GetNamespace(), Name: hc.GetName(), Generation: hc.GetGeneration(),
		VersionHint: hc.GetAnnotations()[ReleaseVersionAnnotation]}
	if raw, ok := hc.Object["spec"].(map[string]any); ok {
		if err := fromMap(raw, &out.Spec); err != nil {
			return out, fmt.Errorf("spec: %w", err)
		}
	}
	return out, nil
}

// mergeStatus writes st into hc's status, keeping status fields that st does not model.
func mergeStatus(hc *unstructured.Unstructured, st status) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	existing, _ := hc.Object["status"].(map[string]any)
	if existing == nil {
		existing = map[string]any{}
	}
	for k, v := range m {
		existing[k] = v
	}
	hc.Object["status"] = existing
	return nil
}

func fromMap(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
