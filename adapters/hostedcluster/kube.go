package hostedcluster

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// FieldManager is the server-side apply field manager of everything the applier writes.
const FieldManager = "hyperfleet-hostedcluster-applier"

// Resources the applier reads and writes.
var (
	hostedClustersGVR = schema.GroupVersionResource{Group: "hypershift.openshift.io", Version: "v1beta1", Resource: "hostedclusters"}
	secretsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

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
	log       *slog.Logger
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
			// The applier's own applies change spec and metadata; HyperShift's progress is in status.
			if statusOrDeletionChanged(oldObj, newObj) {
				notify(newObj, onChange)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			notify(obj, onChange)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch HostedClusters: %w", err)
	}
	k.factories = []dynamicinformer.DynamicSharedInformerFactory{factory, secrets}
	k.hasSynced = []cache.InformerSynced{hcInformer.Informer().HasSynced, secretInformer.Informer().HasSynced}
	return k, nil
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

// Apply server-side applies obj with the applier's field manager, taking over fields another manager set (the
// applier is the authority for what it applies), and returns the object as stored.
func (k *kubeCluster) Apply(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvr := hostedClustersGVR
	if obj.GetKind() == "Secret" {
		gvr = secretsGVR
	}
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	force := true
	applied, err := k.client.Resource(gvr).Namespace(k.namespace).Patch(ctx, obj.GetName(), types.ApplyPatchType, raw,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil {
		return nil, fmt.Errorf("apply %s %s/%s: %w", obj.GetKind(), k.namespace, obj.GetName(), err)
	}
	return applied, nil
}

// Delete deletes the object of kind ("HostedCluster" or "Secret") named name if it is there, in the background
// (its finalizers run on after this returns).
func (k *kubeCluster) Delete(ctx context.Context, kind, name string) error {
	gvr := hostedClustersGVR
	if kind == "Secret" {
		gvr = secretsGVR
	}
	policy := metav1.DeletePropagationBackground
	err := k.client.Resource(gvr).Namespace(k.namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s/%s: %w", kind, k.namespace, name, err)
	}
	return nil
}
