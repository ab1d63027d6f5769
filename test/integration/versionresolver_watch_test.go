package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// The resolver on its default source, the watch, resolves a stream created after it started although its poll
// interval is ten minutes: the stream's created event brought it.
func TestVersionResolverResolvesANewStreamWithoutAPoll(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {versionresolver.Name}})
	sim := startSim(t, cincinnatisim.Series{Minors: []string{"4.16"}, Patches: 3})
	resolver := startResolverTuned(t, s, sim, versionresolver.Options{CincinnatiURL: sim.url(), CincinnatiTimeout: time.Second,
		RecheckAfter: time.Hour, RetryAfter: time.Hour}, noPoll)
	waitForReport(t, s, streamNamed(t, s, defaultStream), "the seeded stream resolved by the first list", resolvedTo("4.16.2"))

	fresh := createStream(t, s, "fresh", api.VersionStreamSpec{TargetVersion: "4.16"})
	st := waitForReport(t, s, *fresh, "4.16.2", resolvedTo("4.16.2"))
	require.Equal(t, cincinnatisim.PayloadFor("4.16.2", "amd64"), st.Data[versionresolver.DataReleaseImage])
	require.Eventually(t, func() bool { return getStream(t, s, *fresh).Status.Phase == api.ResourceStatusPhaseReady }, 10*time.Second, 20*time.Millisecond)

	// The resolver's pending work was listed once, at start; the watch brought the new stream.
	require.Equal(t, 1.0, metricValue(t, resolver.Runner, `hyperfleet_adapter_polls_total{adapter="version-resolver",kind="VersionStream",result="success"}`))
	require.GreaterOrEqual(t, metricValue(t, resolver.Runner, `hyperfleet_adapter_events_received_total{adapter="version-resolver",kind="VersionStream",source="watch",type="created"}`), 1.0)
}
