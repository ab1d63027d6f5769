package hostedcluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// The pacer on a fake clock: a burst goes at once, the rest one per interval in the order asked, a waiting cluster
// asking again keeps its turn (and gets no second one), a forgotten turn is given back to nobody but frees the
// cluster, and time refills the bucket.
func TestPacerAdmit(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	type ask struct {
		id   string
		at   time.Duration // after t0
		want time.Duration
	}
	tests := []struct {
		name   string
		rate   float64
		burst  int
		forget string // forgotten after the asks before the last one
		asks   []ask
	}{
		{"a burst goes at once, then one per interval in order", 2, 1, "", []ask{
			{"a", 0, 0}, {"b", 0, 500 * time.Millisecond}, {"c", 0, time.Second}, {"d", 0, 1500 * time.Millisecond},
		}},
		{"a burst of three", 1, 3, "", []ask{
			{"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}, {"d", 0, time.Second}, {"e", 0, 2 * time.Second},
		}},
		{"asking again before the turn gives the rest of the wait, not a new turn", 2, 1, "", []ask{
			{"a", 0, 0}, {"b", 0, 500 * time.Millisecond}, {"c", 0, time.Second},
			{"b", 200 * time.Millisecond, 300 * time.Millisecond}, {"c", 200 * time.Millisecond, 800 * time.Millisecond},
		}},
		{"at its turn the cluster goes, without taking another token", 2, 1, "", []ask{
			{"a", 0, 0}, {"b", 0, 500 * time.Millisecond}, {"b", 500 * time.Millisecond, 0}, {"c", 500 * time.Millisecond, 500 * time.Millisecond},
		}},
		{"a forgotten turn frees the cluster: asking again reserves anew", 2, 1, "b", []ask{
			{"a", 0, 0}, {"b", 0, 500 * time.Millisecond}, {"b", 0, time.Second},
		}},
		{"time refills the bucket", 1, 2, "", []ask{
			{"a", 0, 0}, {"b", 0, 0}, {"c", 0, time.Second}, {"d", 10 * time.Second, 0}, {"e", 10 * time.Second, 0}, {"f", 10 * time.Second, time.Second},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPacer(tc.rate, tc.burst)
			require.NoError(t, err)
			for i, a := range tc.asks {
				if tc.forget != "" && i == len(tc.asks)-1 {
					p.Forget(tc.forget)
				}
				require.Equal(t, a.want, p.Admit(a.id, t0.Add(a.at)), "ask %d: %s at +%s", i, a.id, a.at)
			}
		})
	}
}

func TestNewPacerRefusesWhatCannotPace(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		burst int
	}{{0, 1}, {-1, 1}, {1, 0}} {
		_, err := NewPacer(tc.rate, tc.burst)
		require.Error(t, err, "rate %v burst %d", tc.rate, tc.burst)
	}
}

// Which writes wait for the pacer: only those to an existing HostedCluster whose hosted_cluster spec and release
// image stay, i.e. the applier's own changes.
func TestReapplyIsPaced(t *testing.T) {
	build := func(t *testing.T, spec api.HostedClusterSpec, image string) *unstructured.Unstructured {
		t.Helper()
		objs, err := Build(&Desired{ClusterID: "id", Name: "c", Namespace: "clusters", Generation: 2, Spec: spec,
			ReleaseImage: image, PullSecret: []byte(`{"auths":{}}`)})
		require.NoError(t, err)
		return objs.HostedCluster
	}
	fips := true
	changed := api.HostedClusterSpec{Fips: &fips}
	legacy := func(gen string) *unstructured.Unstructured { // applied by an applier without the spec-hash annotation
		hc := build(t, api.HostedClusterSpec{}, imageA)
		annotations := hc.GetAnnotations()
		delete(annotations, AnnotationSpecHash)
		annotations[AnnotationGeneration] = gen
		hc.SetAnnotations(annotations)
		return hc
	}
	tests := []struct {
		name    string
		live    *unstructured.Unstructured
		spec    api.HostedClusterSpec
		rollout Rollout
		want    bool
	}{
		{"a first install is not paced", nil, api.HostedClusterSpec{}, Rollout{Image: imageA, Target: imageA}, false},
		{"the same spec and image: the applier's own change, paced", build(t, api.HostedClusterSpec{}, imageA), api.HostedClusterSpec{}, Rollout{Image: imageA, Target: imageA}, true},
		{"the same spec and image while an upgrade waits for its window: paced", build(t, api.HostedClusterSpec{}, imageA), api.HostedClusterSpec{}, Rollout{Image: imageA, Target: imageB, Waiting: true}, true},
		{"a user's spec change rolls at once", build(t, api.HostedClusterSpec{}, imageA), changed, Rollout{Image: imageA, Target: imageA}, false},
		{"a new release image is the schedule's to pace", build(t, api.HostedClusterSpec{}, imageA), api.HostedClusterSpec{}, Rollout{Image: imageB, Target: imageB}, false},
		{"an object of an older applier applied for this generation: paced", legacy("2"), api.HostedClusterSpec{}, Rollout{Image: imageA, Target: imageA}, true},
		{"an object of an older applier applied for an older generation: at once", legacy("1"), api.HostedClusterSpec{}, Rollout{Image: imageA, Target: imageA}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, reapplyIsPaced(tc.live, build(t, tc.spec, tc.rollout.Image), tc.rollout, 2))
		})
	}
}
