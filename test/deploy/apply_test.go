package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

const (
	// prometheusOperator is the Go module whose zip ships the ServiceMonitor and PrometheusRule CRDs, at the newest
	// version the module proxy serves here (it refuses v0.9x of this module, while serving pkg/apis/monitoring at
	// v0.95).
	prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
	// serviceMonitorCRD and prometheusRuleCRD are the CRDs' files in that module.
	serviceMonitorCRD = "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"
	prometheusRuleCRD = "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"
)

// TestManifestsApplyToKubeAPIServer creates HyperFleet's namespace for real, as `kubectl apply -k deploy/` would
// first, then every other object with a server-side dry run: the real API server defaults, validates (strictly:
// an unknown field is an error) and admits each one, including Pod Security admission's check of every pod template
// against the namespace's restricted level, whose findings come back as warnings and fail the test. Then it creates
// the applier's RBAC for real and asks the API server whether the ServiceAccount the applier's pods run as may do
// what its Role allows. The example Secret of the management clusters' kubeconfigs is created the same way.
func TestManifestsApplyToKubeAPIServer(t *testing.T) {
	// The example of the applier's Secret of kubeconfigs is applied by hand, not by kustomize: it must apply too.
	objs := append(render(t, deployDir), exampleSecret(t))
	env := kubeenv.Start(t)
	for _, crd := range []string{serviceMonitorCRD, prometheusRuleCRD} {
		installCRD(t, env, moduleFile(t, prometheusOperator, crd))
	}

	var warnings warningRecorder
	resource := resourceClient(t, env, &warnings)

	// HyperShift's namespace is the operator's to create (deploy/management-cluster says why); ours is in the
	// manifests, labelled for Pod Security admission, so it is created from them.
	clusters := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "clusters"}}}
	for _, ns := range append([]*unstructured.Unstructured{clusters}, kinds(objs, "Namespace")...) {
		_, err := resource(t, ns).Create(t.Context(), ns, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, "creating namespace %s", ns.GetName())
	}

	dryRunCreate(t, resource, &warnings, objs)

	t.Run("the applier's ServiceAccount may do what its Role allows", func(t *testing.T) {
		for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding"} {
			for _, obj := range kinds(objs, kind) {
				if obj.GetNamespace() == "clusters" {
					_, err := resource(t, obj).Create(t.Context(), obj, metav1.CreateOptions{})
					require.NoError(t, err)
				}
			}
		}
		applier := find(t, objs, "Deployment", "hostedcluster-applier")
		sa, _, _ := unstructured.NestedString(applier.Object, "spec", "template", "spec", "serviceAccountName")
		require.NotEmpty(t, sa)
		user := "system:serviceaccount:" + applier.GetNamespace() + ":" + sa

		var role rbacv1.Role
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, "Role", "hostedcluster-applier").Object, &role))
		require.NotEmpty(t, role.Rules)
		for _, rule := range role.Rules {
			for _, group := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, verb := range rule.Verbs {
						review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
							User:   user,
							Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + applier.GetNamespace()},
							ResourceAttributes: &authorizationv1.ResourceAttributes{
								Namespace: role.Namespace, Group: group, Resource: res, Verb: verb},
						}}
						// The RBAC authorizer learns of the new binding from its informers, a moment after the create.
						var status authorizationv1.SubjectAccessReviewStatus
						err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true,
							func(ctx context.Context) (bool, error) {
								got, err := env.Clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
								if err != nil {
									return false, err
								}
								status = got.Status
								return status.Allowed, nil
							})
						require.NoError(t, err, "%s may not %s %s in %s: %+v", user, verb, res, role.Namespace, status)
					}
				}
			}
		}
	})
}

// resourceClient returns a function that gives the dynamic client of an object's resource (namespaced when the
// object is), on a connection whose warnings go to warnings.
func resourceClient(tb testing.TB, env *kubeenv.Env, warnings *warningRecorder) func(*testing.T, *unstructured.Unstructured) dynamic.ResourceInterface {
	tb.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warnings
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(tb, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.Clientset.Discovery()))
	return func(t *testing.T, obj *unstructured.Unstructured) dynamic.ResourceInterface {
		t.Helper()
		gvk := obj.GroupVersionKind()
		var m *meta.RESTMapping
		// Discovery shows a new CRD's kind a moment after its resource is served.
		err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			var err error
			m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) {
				mapper.Reset()
				return false, nil
			}
			return true, err
		})
		require.NoError(t, err, "the API server does not serve %s", gvk)
		if obj.GetNamespace() == "" {
			return dyn.Resource(m.Resource)
		}
		return dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
}

// dryRunCreate creates each object but namespaces with a server-side dry run, strict field validation, and no
// warning from the API server (Pod Security admission's among them) allowed.
func dryRunCreate(t *testing.T, resource func(*testing.T, *unstructured.Unstructured) dynamic.ResourceInterface,
	warnings *warningRecorder, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" {
			continue
		}
		t.Run(obj.GetKind()+"/"+obj.GetName(), func(t *testing.T) {
			warnings.reset()
			_, err := resource(t, obj).Create(t.Context(), obj, metav1.CreateOptions{
				DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
			require.NoError(t, err)
			require.Empty(t, warnings.get(), "the API server's warnings (Pod Security admission's among them)")
		})
	}
}

// kinds returns the objects of a kind.
func kinds(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	return slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool { return o.GetKind() != kind })
}

// moduleFile returns a file of a Go module version, downloaded (and checked against the checksum database) by the go
// command into the module cache. It runs outside this module so that go.mod and go.sum stay as they are: the module
// is data for this test, not a dependency.
func moduleFile(tb testing.TB, module, file string) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = tb.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &info); jsonErr != nil || err != nil || info.Error != "" {
		tb.Fatalf("go mod download %s: %v %s %s", module, err, info.Error, out)
	}
	raw, err := os.ReadFile(filepath.Join(info.Dir, file))
	require.NoError(tb, err, "%s no longer ships %s", module, file)
	return raw
}

// installCRD creates a CustomResourceDefinition and waits until its resource is served.
func installCRD(tb testing.TB, env *kubeenv.Env, manifest []byte) {
	tb.Helper()
	crd := &unstructured.Unstructured{}
	require.NoError(tb, yaml.Unmarshal(manifest, &crd.Object))
	crds := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	_, err := crds.Create(tb.Context(), crd, metav1.CreateOptions{})
	require.NoError(tb, err, "creating CRD %s", crd.GetName())

	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	require.NotEmpty(tb, versions)
	version, _, _ := unstructured.NestedString(versions[0].(map[string]any), "name")
	gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
	var last error
	err = wait.PollUntilContextTimeout(tb.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = env.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return last == nil, nil
	})
	require.NoError(tb, err, "%s is not served: %v", gvr, last)
}

// warningRecorder keeps the warnings the API server sends with its answers.
type warningRecorder struct {
	mu   sync.Mutex
	list []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warningRecorder) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = nil
}

func (w *warningRecorder) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.list)
}
