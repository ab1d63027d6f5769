package hypershiftsim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestVersionOf(t *testing.T) {
	tests := []struct {
		image, want string
	}{
		{"quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64", "4.16.3"},
		{"quay.io/openshift-release-dev/ocp-release:4.17.0-rc.2-aarch64", "4.17.0-rc.2"},
		{"quay.io/openshift-release-dev/ocp-release:4.15.10-multi", "4.15.10"},
		{"quay.io/openshift-release-dev/ocp-release:4.14.1-ppc64le", "4.14.1"},
		{"registry.ci.openshift.org/ocp/release:4.18.0-0.nightly-2025-01-02-123456", "4.18.0-0.nightly-2025-01-02-123456"},
		{"localhost:5000/ocp-release:4.16.3", "4.16.3"},
		{"quay.io/openshift-release-dev/ocp-release@sha256:0123456789abcdef", "fallback"},
		{"quay.io/openshift-release-dev/ocp-release:latest", "fallback"},
		{"quay.io/openshift-release-dev/ocp-release:v4.16.3", "fallback"},
		{"localhost:5000/ocp-release", "fallback"},
		{"ocp-release", "fallback"},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			require.Equal(t, tt.want, versionOf(tt.image, "fallback"))
		})
	}
}

func TestEndpointOf(t *testing.T) {
	svc := func(typ string, set func(s *service)) service {
		s := service{Service: "APIServer"}
		s.Strategy.Type = typ
		if set != nil {
			set(&s)
		}
		return s
	}
	tests := []struct {
		name string
		spec hostedClusterSpec
		want apiEndpoint
	}{
		{"no services", hostedClusterSpec{}, apiEndpoint{"api.hc.hypershift.local", 6443}},
		{"base domain", hostedClusterSpec{DNS: dnsSpec{BaseDomain: "example.org"}}, apiEndpoint{"api.hc.example.org", 6443}},
		{"node port with port", hostedClusterSpec{Services: []service{svc("NodePort", func(s *service) {
			s.Strategy.NodePort = &struct {
				Address string `json:"address"`
				Port    int32  `json:"port"`
			}{"10.0.0.5", 30443}
		})}}, apiEndpoint{"10.0.0.5", 30443}},
		{"node port without port", hostedClusterSpec{Services: []service{svc("NodePort", func(s *service) {
			s.Strategy.NodePort = &struct {
				Address string `json:"address"`
				Port    int32  `json:"port"`
			}{Address: "api.hc.example.com"}
		})}}, apiEndpoint{"api.hc.example.com", 6443}},
		{"load balancer hostname", hostedClusterSpec{Services: []service{svc("LoadBalancer", func(s *service) {
			s.Strategy.LoadBalancer = &hostname{"api.lb.example.com"}
		})}}, apiEndpoint{"api.lb.example.com", 6443}},
		{"load balancer without hostname", hostedClusterSpec{Services: []service{svc("LoadBalancer", nil)}},
			apiEndpoint{"api.hc.hypershift.local", 6443}},
		{"route", hostedClusterSpec{Services: []service{svc("Route", func(s *service) {
			s.Strategy.Route = &hostname{"api.route.example.com"}
		})}}, apiEndpoint{"api.route.example.com", 443}},
		{"other services ignored", hostedClusterSpec{Services: []service{{Service: "OAuthServer"}}},
			apiEndpoint{"api.hc.hypershift.local", 6443}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, endpointOf(hostedCluster{Name: "hc", Spec: tt.spec}))
		})
	}
}

const (
	image416 = "quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64"
	image417 = "quay.io/openshift-release-dev/ocp-release:4.17.1-x86_64"
)

func hc(image string, generation int64) hostedCluster {
	return hostedCluster{Namespace: "ns", Name: "hc", Generation: generation,
		Spec: hostedClusterSpec{Release: release{Image: image}}}
}

// TestNextStatusLifecycle walks one HostedCluster through creation, availability and an upgrade, each step
// starting from the status the previous one reported.
func TestNextStatusLifecycle(t *testing.T) {
	const delay = time.Minute
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	type want struct {
		history     []string // state@version, newest first
		available   metav1.ConditionStatus
		progressing metav1.ConditionStatus
		endpoint    bool
		wait        bool
		after       time.Duration
		changed     bool
	}
	steps := []struct {
		name  string
		hc    hostedCluster
		at    time.Time
		want  want
		check func(t *testing.T, s status)
	}{
		{"first sight starts a rollout", hc(image416, 1), t0, want{
			history: []string{"Partial@4.16.3"}, available: "False", progressing: "True", wait: true, after: delay, changed: true,
		}, func(t *testing.T, s status) {
			require.Nil(t, s.Version.History[0].CompletionTime)
			require.Equal(t, release{Image: image416, Version: "4.16.3"}, s.Version.Desired)
			require.Equal(t, ReasonWaitingForAvailable, cond(t, s, ConditionAvailable).Reason)
			require.Equal(t, metav1.ConditionFalse, cond(t, s, ConditionDegraded).Status)
			require.Equal(t, metav1.ConditionTrue, cond(t, s, ConditionValidReleaseImage).Status)
			require.Nil(t, s.KubeConfig)
		}},
		{"before the delay nothing changes", hc(image416, 1), t0.Add(delay - time.Second), want{
			history: []string{"Partial@4.16.3"}, available: "False", progressing: "True", wait: true, after: time.Second,
		}, nil},
		{"after the delay the rollout completes", hc(image416, 1), t0.Add(delay), want{
			history: []string{"Completed@4.16.3"}, available: "True", progressing: "False", endpoint: true, changed: true,
		}, func(t *testing.T, s status) {
			require.True(t, s.Version.History[0].CompletionTime.Equal(&metav1.Time{Time: t0.Add(delay)}))
			require.Equal(t, &localObjectReference{"hc-admin-kubeconfig"}, s.KubeConfig)
			require.Equal(t, &localObjectReference{"hc-kubeadmin-password"}, s.KubeadminPassword)
			require.Equal(t, ReasonAsExpected, cond(t, s, ConditionAvailable).Reason)
			require.True(t, cond(t, s, ConditionAvailable).LastTransitionTime.Time.Equal(t0.Add(delay)))
		}},
		{"a settled cluster stays as it is", hc(image416, 1), t0.Add(time.Hour), want{
			history: []string{"Completed@4.16.3"}, available: "True", progressing: "False", endpoint: true,
		}, nil},
		{"a new image starts an upgrade", hc(image417, 2), t0.Add(2 * time.Hour), want{
			history: []string{"Partial@4.17.1", "Completed@4.16.3"}, available: "True", progressing: "True", endpoint: true,
			wait: true, after: delay, changed: true,
		}, func(t *testing.T, s status) {
			require.Equal(t, int64(2), s.Version.ObservedGeneration)
			require.Equal(t, int64(2), cond(t, s, ConditionAvailable).ObservedGeneration)
			require.True(t, cond(t, s, ConditionAvailable).LastTransitionTime.Time.Equal(t0.Add(delay)),
				"Available did not change, so neither does its transition time")
		}},
		{"the upgrade completes", hc(image417, 2), t0.Add(2*time.Hour + delay), want{
			history: []string{"Completed@4.17.1", "Completed@4.16.3"}, available: "True", progressing: "False", endpoint: true,
			changed: true,
		}, nil},
	}
	var cur status
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			got := nextStatus(cur, s.hc, s.at, delay, "fallback", nil)
			require.Equal(t, s.want.history, history(got.status))
			require.Equal(t, s.want.available, cond(t, got.status, ConditionAvailable).Status)
			require.Equal(t, s.want.progressing, cond(t, got.status, ConditionProgressing).Status)
			require.Equal(t, s.want.endpoint, got.status.ControlPlaneEndpoint != nil)
			require.Equal(t, s.want.wait, got.wait)
			require.Equal(t, s.want.after, got.after)
			require.Equal(t, s.want.changed, !equality.Semantic.DeepEqual(cur, got.status))
			if s.check != nil {
				s.check(t, got.status)
			}
			cur = got.status
		})
	}
}

func TestNextStatusZeroDelayShowsPartialFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first := nextStatus(status{}, hc(image416, 1), t0, 0, "fallback", nil)
	require.Equal(t, []string{"Partial@4.16.3"}, history(first.status))
	require.True(t, first.wait)
	require.Zero(t, first.after)
	require.NotNil(t, first.started)

	second := nextStatus(first.status, hc(image416, 1), t0, 0, "fallback", nil)
	require.Equal(t, []string{"Completed@4.16.3"}, history(second.status))
	require.False(t, second.wait)
	require.NotNil(t, second.completed)
}

func TestNextStatusDoesNotModifyItsInput(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cur := nextStatus(status{}, hc(image416, 1), t0, 0, "fallback", nil).status
	before := cur.clone()
	_ = nextStatus(cur, hc(image416, 1), t0, 0, "fallback", nil)
	require.True(t, equality.Semantic.DeepEqual(before, cur))
}

func TestNextStatusFallbackVersionAndHistoryCap(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var cur status
	for i := range maxHistory + 5 {
		image := fmt.Sprintf("quay.io/openshift-release-dev/ocp-release@sha256:%064d", i)
		cur = nextStatus(cur, hc(image, int64(i+1)), t0, 0, "9.9.9", nil).status
		cur = nextStatus(cur, hc(image, int64(i+1)), t0, 0, "9.9.9", nil).status
	}
	require.Len(t, cur.Version.History, maxHistory)
	require.Equal(t, "9.9.9", cur.Version.Desired.Version)
	require.Equal(t, "Completed@9.9.9", history(cur)[0])
}

func history(s status) []string {
	var out []string
	for _, r := range s.Version.History {
		out = append(out, r.State+"@"+r.Version)
	}
	return out
}

func cond(tb testing.TB, s status, typ string) metav1.Condition {
	tb.Helper()
	c := meta.FindStatusCondition(s.Conditions, typ)
	require.NotNil(tb, c, "condition %s", typ)
	return *c
}

// A release pinned by digest carries no version the simulator can read; the version a client declares in the
// release-version annotation stands in for the payload's, and a tag still wins over it.
func TestNextStatusVersionHint(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		image, hint, want string
	}{
		{"quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("a", 64), "4.16.3", "4.16.3"},
		{"quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("a", 64), "", "9.9.9"},
		{image416, "4.99.0", "4.16.3"},
	}
	for _, tt := range tests {
		t.Run(tt.image+" "+tt.hint, func(t *testing.T) {
			cluster := hc(tt.image, 1)
			cluster.VersionHint = tt.hint
			got := nextStatus(status{}, cluster, t0, 0, "9.9.9", nil).status
			require.Equal(t, "Partial@"+tt.want, history(got)[0])
		})
	}
}
