package hostedcluster

import (
	"net/http"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
)

// recordingTransport notes its name when a request passes through it, so that the order of wrapped transports shows.
type recordingTransport struct {
	name string
	seen *[]string
	next http.RoundTripper
}

func (r recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	*r.seen = append(*r.seen, r.name)
	return r.next.RoundTrip(req)
}

type answerTransport struct{}

func (answerTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

// Every management cluster's client, in either mode, gets the budget of --kube-api-qps and --kube-api-burst (or
// their deprecated names), the applier's user agent, and the counting transport outside the kubeconfig's own.
func TestKubeClientConfigHasTheFlagsBudget(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantQPS   float32
		wantBurst int
	}{
		{"defaults", nil, DefaultKubeQPS, DefaultKubeBurst},
		{"flags", []string{"--kube-api-qps", "7.5", "--kube-api-burst", "9"}, 7.5, 9},
		{"deprecated names", []string{"--kube-qps", "3", "--kube-burst", "4"}, 3, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			fs := pflag.NewFlagSet("applier", pflag.ContinueOnError)
			o.AddFlags(fs)
			require.NoError(t, fs.Parse(tt.args))

			var seen []string
			base := &rest.Config{Host: "https://mc.example:6443", QPS: 1, Burst: 2,
				WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
					return recordingTransport{name: "kubeconfig", seen: &seen, next: rt}
				}}
			got := kubeClientConfig(base, o.KubeQPS, o.KubeBurst, func(rt http.RoundTripper) http.RoundTripper {
				return recordingTransport{name: "counting", seen: &seen, next: rt}
			})
			require.Equal(t, tt.wantQPS, got.QPS)
			require.Equal(t, tt.wantBurst, got.Burst)
			require.Equal(t, "hyperfleet-"+Name, got.UserAgent)
			require.Equal(t, base.Host, got.Host)
			require.Equal(t, float32(1), base.QPS, "the given config is left as it was")

			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base.Host, http.NoBody)
			require.NoError(t, err)
			resp, err := got.WrapTransport(answerTransport{}).RoundTrip(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, []string{"counting", "kubeconfig"}, seen)
		})
	}
}

// A negative budget is refused (zero is the default, as for the other options).
func TestNegativeKubeBudgetIsRefused(t *testing.T) {
	o := DefaultOptions()
	o.KubeQPS = -1
	o.CredentialsDir = t.TempDir()
	_, err := NewFleet(adapter.Defaults(Name, "127.0.0.1:0"), o, discard())
	require.ErrorContains(t, err, "--kube-api-qps and --kube-api-burst must be positive")
}
