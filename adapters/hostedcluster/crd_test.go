package hostedcluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

// Everything Build makes is accepted by HyperShift's real CRD (OpenAPI schema, defaults and CEL rules) on a real
// kube-apiserver, through the applier's own server-side apply; applying it again writes nothing; and what the CRD
// refuses comes back as a terminal error.
func TestBuiltObjectsAreAcceptedByTheRealCRD(t *testing.T) {
	env := kubeenv.Start(t)
	ns := env.Namespace(t, "crd")
	mgmt, err := newKubeCluster(env.Dynamic, ns, func(string) {}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, mgmt.start(ctx, time.Minute))

	ids := []string{"0193a4c4-5b2e-7c1d-8e9f-0a1b2c3d4e50", "0193a4c4-5b2e-7c1d-8e9f-0a1b2c3d4e51", "0193a4c4-5b2e-7c1d-8e9f-0a1b2c3d4e52",
		"0193a4c4-5b2e-7c1d-8e9f-0a1b2c3d4e53", "0193a4c4-5b2e-7c1d-8e9f-0a1b2c3d4e54", "0193a4c4-5b2e-7c1d-8e9f-0a1b2c3d4e55"}
	for i, tc := range builderCases() {
		t.Run(tc.name, func(t *testing.T) {
			d := &Desired{ClusterID: ids[i], Name: "variant-" + string(rune('a'+i)), Namespace: ns, Generation: 1,
				Spec: decodeHostedCluster(t, tc.spec), ReleaseImage: "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64",
				PullSecret: []byte(`{"auths":{}}`)}
			objs, err := Build(d)
			require.NoError(t, err)
			var hc *unstructured.Unstructured
			for _, obj := range append(objs.Secrets, objs.HostedCluster) {
				first, err := mgmt.Create(ctx, obj)
				require.NoError(t, err, "%s %s", obj.GetKind(), obj.GetName())
				require.Empty(t, driftOf(first, obj), "what the server stores (defaults and all) is no drift")
				var managers []string
				for _, f := range first.GetManagedFields() {
					managers = append(managers, f.Manager+"/"+string(f.Operation))
				}
				require.Equal(t, []string{FieldManager + "/Apply"}, managers, "the create's fields are the apply's")
				// The first apply may tidy the managed fields the create left (a create records "." entries an apply
				// does not); from then on an apply of the same object writes nothing.
				applied, err := mgmt.Update(ctx, obj, first)
				require.NoError(t, err)
				again, err := mgmt.Update(ctx, obj, applied)
				require.NoError(t, err)
				require.Equal(t, applied.GetResourceVersion(), again.GetResourceVersion(), "re-applying %s must not write", obj.GetKind())
				_, err = mgmt.Update(ctx, obj, first)
				require.ErrorIs(t, err, ErrChanged, "an apply over an object read before a change is refused")
				_, err = mgmt.Create(ctx, obj)
				require.ErrorIs(t, err, ErrExists, "a create never takes over what is there")
				hc = again
			}
			// HyperShift's immutable services: a change is refused, and that is terminal for the applier.
			changed := objs.HostedCluster.DeepCopy()
			services := changed.Object["spec"].(map[string]any)["services"].([]any)
			services[0].(map[string]any)["servicePublishingStrategy"] = map[string]any{"type": "LoadBalancer"}
			_, err = mgmt.Update(ctx, changed, hc)
			require.Error(t, err)
			classified := kubeError(err)
			require.True(t, errors.Is(classified, adapter.ErrTerminal), "a 422 is terminal: %v", err)
			require.Equal(t, ReasonHostedClusterInvalid, adapter.ErrorReason(classified))
		})
	}

	t.Run("the CRD refuses a non-UUID clusterID and GCP, which the API never lets through", func(t *testing.T) {
		objs, err := Build(&Desired{ClusterID: "not-a-uuid-but-exactly-36-characters", Name: "bad-id", Namespace: ns, Generation: 1,
			Spec: decodeHostedCluster(t, `{`+apiDefaults+`}`), ReleaseImage: "quay.io/x:4.16.3", PullSecret: []byte(`{}`)})
		require.NoError(t, err)
		_, err = mgmt.Create(ctx, objs.HostedCluster)
		require.True(t, errors.Is(kubeError(err), adapter.ErrTerminal), "%v", err)

		gcp := objs.HostedCluster.DeepCopy()
		gcp.SetName("gcp")
		gcp.Object["spec"].(map[string]any)["clusterID"] = "0193a4c4-5b2e-7c1d-8e9f-0a1b2c3d4e59"
		gcp.Object["spec"].(map[string]any)["platform"] = map[string]any{"type": "GCP"}
		_, err = mgmt.Create(ctx, gcp)
		require.True(t, errors.Is(kubeError(err), adapter.ErrTerminal), "%v", err)
	})
}
