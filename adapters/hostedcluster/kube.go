package hostedcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/csaupgrade"
)

// FieldManager is the server-side apply field manager of everything the applier writes.
const FieldManager = "hyperfleet-hostedcluster-applier"

// Resources the applier reads and writes.
var (
	hostedClustersGVR = schema.GroupVersionResource{Group: "hypershift.openshift.io", Version: "v1beta1", Resource: "hostedclusters"}
	secretsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// kubeClientConfig is the client configuration of a management cluster, in either mode: base's server and
// credentials, the applier's user agent and rate budget, and transport wrapped around whatever base already wraps
// its transport with (the runner's ExternalTransport, which counts the calls).
func kubeClientConfig(base *rest.Config, qps float32, burst int, transport func(http.RoundTripper) http.RoundTripper) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.UserAgent = "hyperfleet-" + Name
	cfg.QPS, cfg.Burst = qps, burst
	wrapped := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrapped != nil {
			rt = wrapped(rt)
		}
		return transport(rt)
	}
	return cfg
}

// kubeCluster is the management cluster: server-side apply through the dynamic client, and reads from watch caches
// so that a re-check of a settled cluster costs the management cluster nothing. HostedClusters of the namespace
// are all cached (an object that is not ours must be seen to be left alone); Secrets only when they carry the
// managed-by label the applier sets.
type kubeCluster struct {
	client    dynamic.Interface
	namespace string
	factories []dynamicinformer.DynamicSharedInformerFactory
	hcs       cache.GenericLister
	secrets   cache.GenericLister
	// hasSynced are the informers' HasSynced: true once each has listed the namespace.
	hasSynced []cache.InformerSynced
	// watches follow the informers' failures (Fresh).
	watches []*watchHealth
	log     *slog.Logger
}

// newKubeCluster builds the caches; onChange is called with a cluster id whenever HyperShift changes a
// HostedCluster's status (or deletes one), so that the applier reports progress without polling. Start the
// caches with start before use.
func newKubeCluster(client dynamic.Interface, namespace string, onChange func(clusterID string), log *slog.Logger) (*kubeCluster, error) {
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, namespace, nil)
	secrets := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = LabelManagedBy + "=" + managedByValue
	})
	k := &kubeCluster{client: client, namespace: namespace, log: log}
	hcInformer := factory.ForResource(hostedClustersGVR)
	secretInformer := secrets.ForResource(secretsGVR)
	k.hcs, k.secrets = hcInformer.Lister(), secretInformer.Lister()
	_, err := hcInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { notify(obj, onChange) },
		UpdateFunc: func(oldObj, newObj any) {
			// HyperShift's progress is in status; a change of spec (its generation) or of the labels and
			// annotations may be a hand edit to set back. The applier's own writes wake the cluster once, to no
			// effect.
			if statusOrDeletionChanged(oldObj, newObj) || editedBySomeone(oldObj, newObj) {
				notify(newObj, onChange)
			}
		},
		DeleteFunc: func(obj any) { notifyDeleted(obj, onChange) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch HostedClusters: %w", err)
	}
	// A Secret of a cluster's changed or deleted by hand, or one of an older naming, is seen to at once.
	_, err = secretInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { notify(obj, onChange) },
		UpdateFunc: func(oldObj, newObj any) {
			if editedBySomeone(oldObj, newObj) || !reflect.DeepEqual(field(oldObj, "data"), field(newObj, "data")) {
				notify(newObj, onChange)
			}
		},
		DeleteFunc: func(obj any) { notifyDeleted(obj, onChange) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch Secrets: %w", err)
	}
	for _, w := range []struct {
		what     string
		informer cache.SharedIndexInformer
	}{{"HostedClusters in " + namespace, hcInformer.Informer()}, {"Secrets in " + namespace, secretInformer.Informer()}} {
		h, err := newWatchHealth(w.what, w.informer, time.Now)
		if err != nil {
			return nil, err
		}
		k.watches = append(k.watches, h)
	}
	k.factories = []dynamicinformer.DynamicSharedInformerFactory{factory, secrets}
	k.hasSynced = []cache.InformerSynced{hcInformer.Informer().HasSynced, secretInformer.Informer().HasSynced}
	return k, nil
}

// Fresh returns nil while the watch caches follow the management cluster, and ErrCacheStale (with the watch's
// error) once one has stopped: its reads would answer what it last saw as if it were now.
func (k *kubeCluster) Fresh() error {
	var errs []error
	for _, w := range k.watches {
		if err := w.stale(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// run starts the watches, which run until ctx ends, without waiting for them to list: until they have, reads are
// answered by the management cluster itself (see get).
func (k *kubeCluster) run(ctx context.Context) {
	for _, f := range k.factories {
		f.Start(ctx.Done())
	}
}

// shutdown waits for the watches' goroutines to end; call it after the context given to run has ended.
func (k *kubeCluster) shutdown() {
	for _, f := range k.factories {
		f.Shutdown()
	}
}

// waitSynced waits until both caches have listed the namespace, or ctx ends; it reports whether they have.
func (k *kubeCluster) waitSynced(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), k.hasSynced...)
}

// hosted counts the HostedClusters in the cache that carry the applier's cluster-id label: the clusters it hosts
// there for HyperFleet (an object of someone else's is no slot the placer gave out).
func (k *kubeCluster) hosted() (int, error) {
	owned, err := labels.NewRequirement(LabelClusterID, selection.Exists, nil)
	if err != nil {
		return 0, fmt.Errorf("label selector: %w", err)
	}
	objs, err := k.hcs.ByNamespace(k.namespace).List(labels.NewSelector().Add(*owned))
	if err != nil {
		return 0, fmt.Errorf("list HostedClusters in %s: %w", k.namespace, err)
	}
	return len(objs), nil
}

// start starts the watches, which run until ctx ends, and waits up to timeout until the caches hold the
// namespace's objects.
func (k *kubeCluster) start(ctx context.Context, timeout time.Duration) error {
	k.run(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, f := range k.factories {
		for gvr, synced := range f.WaitForCacheSync(syncCtx.Done()) {
			if !synced {
				return fmt.Errorf("the watch of %s in namespace %q did not sync: is the HyperShift CRD installed, and may the applier list and watch it?", gvr.Resource, k.namespace)
			}
		}
	}
	return nil
}

func notify(obj any, onChange func(string)) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if id := u.GetLabels()[LabelClusterID]; id != "" {
		onChange(id)
	}
}

func notifyDeleted(obj any, onChange func(string)) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	notify(obj, onChange)
}

// editedBySomeone reports whether what the applier writes of an object may have changed: its generation (the
// spec), labels or annotations.
func editedBySomeone(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*unstructured.Unstructured)
	n, ok2 := newObj.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return true
	}
	return o.GetGeneration() != n.GetGeneration() || !reflect.DeepEqual(o.GetLabels(), n.GetLabels()) ||
		!reflect.DeepEqual(o.GetAnnotations(), n.GetAnnotations())
}

func field(obj any, name string) any {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object[name]
	}
	return nil
}

func statusOrDeletionChanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*unstructured.Unstructured)
	n, ok2 := newObj.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return true
	}
	return !reflect.DeepEqual(o.Object["status"], n.Object["status"]) ||
		(o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil)
}

// HostedCluster returns the HostedCluster named name, or nil. The cache answers; an object it does not hold is
// asked for once, in case it was created a moment ago.
func (k *kubeCluster) HostedCluster(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	return k.get(ctx, k.hcs, hostedClustersGVR, name)
}

// Secret returns the Secret named name, or nil.
func (k *kubeCluster) Secret(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	return k.get(ctx, k.secrets, secretsGVR, name)
}

func (k *kubeCluster) get(ctx context.Context, lister cache.GenericLister, gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
	obj, err := lister.ByNamespace(k.namespace).Get(name)
	if err == nil {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return u, nil
		}
	}
	u, err := k.client.Resource(gvr).Namespace(k.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", gvr.Resource, k.namespace, name, err)
	}
	return u, nil
}

// Errors of the preconditioned writes: the object is not what the applier read a moment ago.
var (
	// ErrExists is Create's error when an object of that name is there already (made since it was read).
	ErrExists = errors.New("an object of that name exists")
	// ErrChanged is Update's and Delete's error when the object changed, went or was replaced since it was read.
	ErrChanged = errors.New("the object changed since it was read")
)

func gvrOf(kind string) schema.GroupVersionResource {
	if kind == "Secret" {
		return secretsGVR
	}
	return hostedClustersGVR
}

// Create creates obj only if there is no object of its name (a POST: the server refuses a second one), so that an
// object someone else made a moment ago is never taken over; ErrExists if there is one. The fields it sets are then
// handed to the applier's server-side apply manager, so that a later apply that leaves a field out removes it.
func (k *kubeCluster) Create(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	res := k.client.Resource(gvrOf(obj.GetKind())).Namespace(k.namespace)
	created, err := res.Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create %s %s/%s: %w", obj.GetKind(), k.namespace, obj.GetName(), ErrExists)
	}
	if err != nil {
		return nil, fmt.Errorf("create %s %s/%s: %w", obj.GetKind(), k.namespace, obj.GetName(), err)
	}
	if upgraded, err := k.ownFields(ctx, created); err == nil {
		return upgraded, nil
	} else if !errors.Is(err, ErrChanged) {
		k.log.Warn("the created object's fields stay with the create; the next apply hands them over",
			slog.String("kind", obj.GetKind()), slog.String("name", obj.GetName()), slog.Any("error", err))
	}
	return created, nil
}

// ownFields moves the fields a create (or an update) of the applier's field manager owns to its apply entry, so
// that server-side apply alone decides them; it returns live unchanged when there is nothing to move. The patch
// carries live's resourceVersion: ErrChanged when the object moved on.
func (k *kubeCluster) ownFields(ctx context.Context, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldManager), FieldManager)
	if err != nil || patch == nil {
		return live, err
	}
	out, err := k.client.Resource(gvrOf(live.GetKind())).Namespace(k.namespace).Patch(ctx, live.GetName(), types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("hand over the fields of %s %s/%s: %w", live.GetKind(), k.namespace, live.GetName(), ErrChanged)
	}
	if err != nil {
		return nil, fmt.Errorf("hand over the fields of %s %s/%s: %w", live.GetKind(), k.namespace, live.GetName(), err)
	}
	return out, nil
}

// Update server-side applies obj with the applier's field manager over live, the object as the applier read it
// and checked to be its own: the apply carries live's resourceVersion, so that it is refused (ErrChanged) if the
// object changed, went or was replaced since. It takes over fields another manager set (the applier is the
// authority for what it applies, and this is how a hand edit is set back), and returns the object as stored.
func (k *kubeCluster) Update(ctx context.Context, obj, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live, err := k.ownFields(ctx, live)
	if err != nil {
		return nil, err
	}
	preconditioned := obj.DeepCopy()
	preconditioned.SetResourceVersion(live.GetResourceVersion())
	raw, err := preconditioned.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	force := true
	applied, err := k.client.Resource(gvrOf(obj.GetKind())).Namespace(k.namespace).Patch(ctx, obj.GetName(), types.ApplyPatchType, raw,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("apply %s %s/%s at resourceVersion %s: %w", obj.GetKind(), k.namespace, obj.GetName(), live.GetResourceVersion(), ErrChanged)
	}
	if err != nil {
		return nil, fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), k.namespace, obj.GetName(), err)
	}
	return applied, nil
}

// Delete deletes live in the background (its finalizers run on after this returns), only if the object of its name
// is still the one of live's UID: nil when it is gone already, ErrChanged when the name now holds another object.
func (k *kubeCluster) Delete(ctx context.Context, live *unstructured.Unstructured) error {
	policy := metav1.DeletePropagationBackground
	uid := live.GetUID()
	err := k.client.Resource(gvrOf(live.GetKind())).Namespace(k.namespace).Delete(ctx, live.GetName(),
		metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("delete %s %s/%s (uid %s): %w", live.GetKind(), k.namespace, live.GetName(), uid, ErrChanged)
	}
	return fmt.Errorf("delete %s %s/%s: %w", live.GetKind(), k.namespace, live.GetName(), err)
}

// Secrets returns the Secrets labelled with the cluster id clusterID, from the cache once it has listed them.
func (k *kubeCluster) Secrets(ctx context.Context, clusterID string) ([]*unstructured.Unstructured, error) {
	return k.labelled(ctx, k.secrets, secretsGVR, labels.SelectorFromSet(labels.Set{LabelClusterID: clusterID, LabelManagedBy: managedByValue}))
}

// owned returns every HostedCluster and Secret labelled with a cluster id (the orphan sweep's candidates); ok is
// false while the caches have not listed the namespace yet.
func (k *kubeCluster) owned() (hcs, secrets []*unstructured.Unstructured, ok bool, err error) {
	for _, synced := range k.hasSynced {
		if !synced() {
			return nil, nil, false, nil
		}
	}
	owned, err := labels.NewRequirement(LabelClusterID, selection.Exists, nil)
	if err != nil {
		return nil, nil, false, fmt.Errorf("label selector: %w", err)
	}
	selector := labels.NewSelector().Add(*owned)
	if hcs, err = listed(k.hcs.ByNamespace(k.namespace).List(selector)); err != nil {
		return nil, nil, false, fmt.Errorf("list HostedClusters in %s: %w", k.namespace, err)
	}
	if secrets, err = listed(k.secrets.ByNamespace(k.namespace).List(selector)); err != nil {
		return nil, nil, false, fmt.Errorf("list Secrets in %s: %w", k.namespace, err)
	}
	return hcs, secrets, true, nil
}

func (k *kubeCluster) labelled(ctx context.Context, lister cache.GenericLister, gvr schema.GroupVersionResource, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	synced := true
	for _, s := range k.hasSynced {
		synced = synced && s()
	}
	if synced {
		out, err := listed(lister.ByNamespace(k.namespace).List(selector))
		if err != nil {
			return nil, fmt.Errorf("list %s in %s: %w", gvr.Resource, k.namespace, err)
		}
		return out, nil
	}
	list, err := k.client.Resource(gvr).Namespace(k.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, fmt.Errorf("list %s in %s: %w", gvr.Resource, k.namespace, err)
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func listed(objs []runtime.Object, err error) ([]*unstructured.Unstructured, error) {
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out, nil
}
