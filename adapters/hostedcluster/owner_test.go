package hostedcluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// A HostedCluster is made once; one that went without HyperFleet deleting it comes back only when a recreate
// request the applier has not seen before asks.
func TestApplierOwnPresence(t *testing.T) {
	there := &unstructured.Unstructured{Object: map[string]any{}}
	deleting := &unstructured.Unstructured{Object: map[string]any{}}
	deleting.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	made := memory{uid: "u-1"}
	tests := []struct {
		name  string
		live  *unstructured.Unstructured
		mem   memory
		token string
		want  presence
	}{
		{"there", there, made, "", presenceInstalled},
		{"there, never remembered (made by a reconcile that died before its report)", there, memory{}, "", presenceInstalled},
		{"never made", nil, memory{}, "", presenceNew},
		{"never made, a recreate label already set", nil, memory{}, "1", presenceNew},
		{"made and gone", nil, made, "", presenceMissing},
		{"made and gone, known from a report written before the UID was kept", nil, memory{ref: "clusters/a"}, "", presenceMissing},
		{"made and gone, the request already spent", nil, memory{uid: "u-1", token: "1"}, "1", presenceMissing},
		{"made and gone, a new request", nil, memory{uid: "u-1", token: "1"}, "2", presenceRecreate},
		{"made and gone, a first request", nil, made, "now", presenceRecreate},
		{"being deleted by someone else", deleting, made, "2", presenceDeleting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, presenceOf(tt.live, tt.mem, tt.token))
		})
	}
}

// What the applier must remember survives a reconcile that set none of it.
func TestApplierOwnRemember(t *testing.T) {
	out := adapter.Outcome{Available: conditions.Reported{Status: conditions.False, Reason: ReasonVersionStreamNotFound}}
	remember(&out, memoryOf(&adapter.Report{Data: map[string]any{DataHostedClusterUID: "u-1", DataRecreateToken: "1"}}))
	require.Equal(t, map[string]any{DataHostedClusterUID: "u-1", DataRecreateToken: "1"}, out.Data)

	out = adapter.Outcome{Data: map[string]any{DataHostedClusterUID: "u-2"}}
	remember(&out, memory{uid: "u-1"})
	require.Equal(t, "u-2", out.Data[DataHostedClusterUID], "what this reconcile found wins")
}

// Drift is a field the applier set whose value is no longer what it set; what it never set, and the generation
// annotation, are not drift.
func TestApplierOwnDrift(t *testing.T) {
	objs, err := Build(&Desired{ClusterID: "0193a4c4-5b2e-7c1d-8e9f-0a1b2c3d4e5f", Name: "prod", Namespace: "clusters", Generation: 2,
		Spec:         decodeHostedCluster(t, `{`+apiDefaults+`,"networking":{"cluster_network":[{"cidr":"10.132.0.0/14","host_prefix":23}]}}`),
		ReleaseImage: "quay.io/x:4.16.3", PullSecret: []byte(`{}`)})
	require.NoError(t, err)
	desired := objs.HostedCluster
	tests := []struct {
		name string
		edit func(u *unstructured.Unstructured)
		want []string
	}{
		{"as applied", func(*unstructured.Unstructured) {}, nil},
		{"server defaults and other managers' fields", func(u *unstructured.Unstructured) {
			spec := u.Object["spec"].(map[string]any)
			spec["olmCatalogPlacement"] = "management"
			spec["etcd"].(map[string]any)["managed"].(map[string]any)["storage"].(map[string]any)["restoreSnapshotURL"] = []any{}
			u.SetFinalizers([]string{"hypershift.openshift.io/finalizer"})
			u.Object["status"] = map[string]any{"conditions": []any{}}
		}, nil},
		{"an older generation annotation", func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			a[AnnotationGeneration] = "1"
			u.SetAnnotations(a)
		}, nil},
		{"a number as the server decodes it", func(u *unstructured.Unstructured) {
			n := u.Object["spec"].(map[string]any)["networking"].(map[string]any)["clusterNetwork"].([]any)[0].(map[string]any)
			n["hostPrefix"] = float64(23)
		}, nil},
		{"the release image edited by hand", func(u *unstructured.Unstructured) {
			u.Object["spec"].(map[string]any)["release"] = map[string]any{"image": "quay.io/x:4.16.9"}
		}, []string{"spec.release.image"}},
		{"a service removed", func(u *unstructured.Unstructured) {
			spec := u.Object["spec"].(map[string]any)
			spec["services"] = spec["services"].([]any)[1:]
		}, []string{"spec.services"}},
		{"the applied-hash annotation removed and a label changed", func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			delete(a, AnnotationAppliedHash)
			u.SetAnnotations(a)
			l := u.GetLabels()
			l[LabelClusterName] = "other"
			u.SetLabels(l)
		}, []string{"metadata.annotations." + AnnotationAppliedHash, "metadata.labels." + LabelClusterName}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := desired.DeepCopy()
			tt.edit(live)
			require.Equal(t, tt.want, driftOf(live, desired))
		})
	}
}
