package hostedcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/kubeenv"
)

// When a watch cache stops following the management cluster, and when it follows it again.
func TestApplierOwnWatchHealth(t *testing.T) {
	gr := schema.GroupResource{Group: "hypershift.openshift.io", Resource: "hostedclusters"}
	forbidden := apierrors.NewForbidden(gr, "", errors.New("RBAC: access denied"))
	steps := []struct {
		name  string
		err   error         // a failure the informer reports, if any
		step  time.Duration // time passing first
		rv    string        // the informer's last synced resource version, if it moves
		stale bool
	}{
		{name: "following"},
		{name: "the server closes the watch", err: io.EOF},
		{name: "the resource version expired", err: apierrors.NewResourceExpired("too old")},
		{name: "a connection drops", err: errors.New("connection reset by peer")},
		{name: "and keeps failing, not yet for long", step: 20 * time.Second, err: errors.New("connection refused")},
		{name: "for longer than staleAfter", step: 11 * time.Second, err: errors.New("connection refused"), stale: true},
		{name: "listed again", rv: "2"},
		{name: "RBAC revoked: stale at once", err: forbidden, stale: true},
		{name: "still, a minute later", step: time.Minute, stale: true},
		{name: "a bookmark after the rights came back", rv: "3"},
		{name: "the CRD is gone", err: apierrors.NewNotFound(gr, ""), stale: true},
		{name: "the token expired too", err: apierrors.NewUnauthorized("token expired"), stale: true},
		{name: "synced again", rv: "4"},
	}
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	rv := "1"
	h := &watchHealth{what: "HostedClusters in clusters", lastRV: func() string { return rv }, now: func() time.Time { return now }}
	for _, s := range steps {
		now = now.Add(s.step)
		if s.rv != "" {
			rv = s.rv
		}
		if s.err != nil {
			h.failed(s.err)
		}
		err := h.stale()
		if !s.stale {
			require.NoError(t, err, s.name)
			continue
		}
		require.ErrorIs(t, err, ErrCacheStale, s.name)
		require.Contains(t, err.Error(), "HostedClusters in clusters", s.name)
	}
}

// The applier's rights on a management cluster are revoked while it runs (its watch goes on streaming, as the
// kube-apiserver lets it): the next probe finds that it may no longer list, and its clusters report Unknown with
// ManagementClusterCacheStale instead of the frozen cache's truth, the ManagementCluster reports it, and the fleet
// says so for /readyz. A rotated kubeconfig, for an account that has the rights, makes it whole again.
func TestApplierOwnStaleCacheIsReportedUntilRotated(t *testing.T) {
	env := kubeenv.Start(t)
	ns := env.Namespace(t, "stale")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	writeKubeconfig(t, filepath.Join(dir, "mc-a"), grantApplier(ctx, t, env, ns, "applier-1"))

	mc := &adapter.Object{ID: "0193a4c4-0000-7000-8000-00000000000b", Name: "mc-a",
		Spec: []byte(`{"namespace":"` + ns + `","credentials":{"kubeconfig":"mc-a"},"capacity":{"max_hosted_clusters":4}}`)}
	fake := &fakeAPI{mcs: map[string]*adapter.Object{"mc-a": mc}}
	f := newFleet(fleetConfig{placer: placerRef(t), dir: dir, qps: 20, burst: 30, probeEvery: 200 * time.Millisecond,
		probeFor: 10 * time.Second, transport: func(rt http.RoundTripper) http.RoundTripper { return rt },
		wake: func(*adapter.Kind, string, string) bool { return true }, specTTL: time.Hour}, fake, discard())
	defer f.close()
	rec := &managementClusters{fleet: f, resync: time.Minute}
	cluster := &adapter.Object{ID: "c", LastReport: &adapter.Report{Data: map[string]any{DataManagementCluster: "mc-a"}}}

	out, err := rec.Reconcile(ctx, mc)
	require.NoError(t, err)
	require.Equal(t, conditions.True, out.Available.Status, out.Available.Message)
	_, err = f.Place(ctx, cluster)
	require.NoError(t, err)
	require.NoError(t, f.stale())

	require.NoError(t, env.Dynamic.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}).
		Namespace(ns).Delete(ctx, "applier-1", metav1.DeleteOptions{}))
	var placeErr error
	require.Eventually(t, func() bool {
		_, placeErr = f.Place(ctx, cluster)
		return errors.Is(placeErr, ErrCacheStale)
	}, time.Minute, 100*time.Millisecond, "the revoked rights found by a probe")
	got := placementOutcome("mc-a", placeErr)
	require.Equal(t, conditions.Unknown, got.Available.Status)
	require.Equal(t, ReasonCacheStale, got.Available.Reason)
	require.Contains(t, got.Available.Message, "forbidden")
	require.ErrorIs(t, f.stale(), ErrCacheStale)
	out, err = rec.Reconcile(ctx, mc)
	require.NoError(t, err)
	require.Equal(t, ReasonCacheStale, out.Available.Reason)

	writeKubeconfig(t, filepath.Join(dir, "mc-a"), grantApplier(ctx, t, env, ns, "applier-2"))
	require.Eventually(t, func() bool {
		_, placeErr = f.Place(ctx, cluster)
		return placeErr == nil && f.stale() == nil
	}, time.Minute, 100*time.Millisecond, "the rotated kubeconfig read on a probe's tick")
	out, err = rec.Reconcile(ctx, mc)
	require.NoError(t, err)
	require.Equal(t, conditions.True, out.Available.Status, out.Available.Message)
}

// grantApplier makes a user with the applier's Role in ns (rbac.yaml's rules), bound by a RoleBinding named after
// the user, and returns its config.
func grantApplier(ctx context.Context, t *testing.T, env *kubeenv.Env, ns, user string) *rest.Config {
	t.Helper()
	cfg := env.User(t, user)
	role := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": user},
		"rules": []any{
			map[string]any{"apiGroups": []any{"hypershift.openshift.io"}, "resources": []any{"hostedclusters"},
				"verbs": []any{"get", "list", "watch", "create", "patch", "delete"}},
			map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"},
				"verbs": []any{"get", "list", "watch", "create", "patch", "delete"}},
		},
	}}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": user},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}},
	}}
	for resource, obj := range map[string]*unstructured.Unstructured{"roles": role, "rolebindings": binding} {
		_, err := env.Dynamic.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: resource}).
			Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		require.NoError(t, err, "create %s %s", resource, user)
	}
	return cfg
}

// writeKubeconfig writes a kubeconfig of cfg (a client-certificate user) to path.
func writeKubeconfig(t *testing.T, path string, cfg *rest.Config) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["mc"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["applier"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["mc"] = &clientcmdapi.Context{Cluster: "mc", AuthInfo: "applier"}
	kc.CurrentContext = "mc"
	raw, err := clientcmd.Write(*kc)
	require.NoError(t, err)
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, raw, 0o600))
	require.NoError(t, os.Rename(tmp, path), fmt.Sprintf("rotate %s", path))
}
