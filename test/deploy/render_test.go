// Package deploy renders the kustomizations under deploy/ as `kubectl apply -k` would and checks what comes out:
// the real kube-apiserver accepts every object (server-side dry run, strict field validation, the restricted Pod
// Security Standard of the namespace), every pod template is restricted, every flag a container passes exists on
// its binary, and the applier's RBAC is the adapter's own.
package deploy

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// deployDir is deploy/ seen from this package's directory, where go test runs.
var deployDir = filepath.Join("..", "..", "deploy")

// render builds the kustomization in dir the way `kubectl apply -k` and `kustomize build` do (no file from outside
// it, no plugins) and returns its objects in kustomize's order.
func render(tb testing.TB, dir string) []*unstructured.Unstructured {
	tb.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(tb, err, "kustomize build %s", dir)
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		m, err := r.Map()
		require.NoError(tb, err)
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	require.NotEmpty(tb, objs, "kustomize build %s", dir)
	return objs
}

// workload is an object with a pod template.
type workload struct {
	obj      *unstructured.Unstructured
	pod      corev1.PodSpec
	labels   map[string]string // the pod template's
	replicas *int32
}

func (w workload) String() string { return w.obj.GetKind() + "/" + w.obj.GetName() }

// containers returns the init containers and the containers.
func (w workload) containers() []corev1.Container {
	return append(append([]corev1.Container{}, w.pod.InitContainers...), w.pod.Containers...)
}

// workloads returns the Deployments, StatefulSets and Jobs among objs, and fails on any other kind with a pod template,
// which these checks would otherwise pass over.
func workloads(tb testing.TB, objs []*unstructured.Unstructured) []workload {
	tb.Helper()
	var out []workload
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			require.NoError(tb, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &d, true))
			out = append(out, workload{obj: obj, pod: d.Spec.Template.Spec, labels: d.Spec.Template.Labels, replicas: d.Spec.Replicas})
		case "StatefulSet":
			var s appsv1.StatefulSet
			require.NoError(tb, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &s, true))
			out = append(out, workload{obj: obj, pod: s.Spec.Template.Spec, labels: s.Spec.Template.Labels, replicas: s.Spec.Replicas})
		case "Job":
			var j batchv1.Job
			require.NoError(tb, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &j, true))
			out = append(out, workload{obj: obj, pod: j.Spec.Template.Spec, labels: j.Spec.Template.Labels})
		case "Pod", "DaemonSet", "ReplicaSet", "CronJob":
			tb.Fatalf("%s/%s: add its kind to workloads() so that its pod template is checked", obj.GetKind(), obj.GetName())
		}
	}
	require.NotEmpty(tb, out)
	return out
}

// envRef is a $(VAR) reference, which Kubernetes expands in command and args from the container's environment.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandArgs returns c's args as the container will see them in a replica: $(VAR) replaced by
// the value Kubernetes would give VAR. It fails on a reference it cannot resolve, since the container would then
// get the literal text.
func expandArgs(tb testing.TB, w workload, c corev1.Container) []string {
	tb.Helper()
	values := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			values[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			values[e.Name] = w.obj.GetName() + "-0"
		}
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = envRef.ReplaceAllStringFunc(a, func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			v, ok := values[name]
			if !ok {
				tb.Errorf("%s/%s: argument %q refers to $(%s), which the test cannot resolve like Kubernetes would", w, c.Name, a, name)
			}
			return v
		})
	}
	return args
}
