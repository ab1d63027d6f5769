package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// benchSource is a source the latency benchmarks compare; tune configures a runtime for it, given the JetStream
// stream and subject prefix of the benchmark's API.
type benchSource struct {
	name string
	tune func(stream, prefix string) func(*adapter.Config)
}

// benchSources are the watch and NATS (the poll a 10-minute safety net beside them, so that it never answers), and
// the poll alone at its old default interval.
func benchSources() []benchSource {
	return []benchSource{
		{name: "watch", tune: func(string, string) func(*adapter.Config) { return noPoll }},
		{name: "nats", tune: func(stream, prefix string) func(*adapter.Config) {
			return func(c *adapter.Config) { noPoll(c); fromNATS(stream, prefix)(c) }
		}},
		{name: "poll-5s", tune: func(string, string) func(*adapter.Config) {
			return func(c *adapter.Config) { c.Source, c.PollInterval = adapter.SourcePoll, adapter.DefaultPollInterval }
		}},
	}
}

// startsReconciler reports the first reconcile of each resource name on a channel.
type startsReconciler struct {
	mu     sync.Mutex
	seen   map[string]bool
	starts chan string
}

func (s *startsReconciler) Reconcile(_ context.Context, obj *adapter.Object) (adapter.Outcome, error) {
	s.mu.Lock()
	first := !s.seen[obj.Name]
	s.seen[obj.Name] = true
	s.mu.Unlock()
	if first {
		s.starts <- obj.Name
	}
	return ok(obj)
}

func (s *startsReconciler) Finalize(context.Context, *adapter.Object) (adapter.Outcome, error) {
	return adapter.Outcome{Finalized: true}, nil
}

// benchServer starts an API that relays to a JetStream stream of the benchmark's own (for the nats source).
func benchServer(b *testing.B, required map[string][]string, nats bool) (s *apiServer, stream, prefix string) {
	b.Helper()
	overrides := server.Config{RequiredAdapters: required}
	if nats {
		js := jetStream(b)
		stream, prefix = natsNames(b)
		deleteStreamAtEnd(b, js, stream)
		overrides.EventsNATSURL, overrides.EventsNATSStream, overrides.EventsNATSSubjectPrefix = natsURL, stream, prefix
	}
	return startServerOn(b, harness.NewDatabase(b), overrides), stream, prefix
}

// BenchmarkWatchLatency measures, per source, the time from a create's 201 to the adapter's reconcile of the new
// resource starting (after the runtime's fresh read of it), one create at a time. For the poll the creates fall
// at random points of its interval. Reported: p50-ms and p99-ms.
//
//	go test ./test/integration -run '^$' -bench 'WatchLatency/source=(watch|nats)' -benchtime 200x
//	go test ./test/integration -run '^$' -bench 'WatchLatency/source=poll' -benchtime 20x
func BenchmarkWatchLatency(b *testing.B) {
	for _, src := range benchSources() {
		b.Run("source="+src.name, func(b *testing.B) {
			s, stream, prefix := benchServer(b, map[string][]string{"versionstream": {testAdapter}}, src.name == "nats")
			rec := &startsReconciler{seen: map[string]bool{}, starts: make(chan string, 16)}
			startRuntime(b, s, rec, src.tune(stream, prefix))
			awaitStart(b, rec, defaultStream) // the first list (or poll) is done
			latencies := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				if src.name == "poll-5s" {
					time.Sleep(rand.N(adapter.DefaultPollInterval)) //nolint:gosec // a random phase, not a secret
				}
				name := fmt.Sprintf("latency-%d", i)
				createStream(b, s, name, api.VersionStreamSpec{TargetVersion: "4.16"})
				created := time.Now()
				latencies = append(latencies, awaitStart(b, rec, name).Sub(created))
			}
			b.StopTimer()
			reportPercentiles(b, latencies)
		})
	}
}

// awaitStart waits for the first reconcile of name and returns when it was seen.
func awaitStart(b *testing.B, rec *startsReconciler, name string) time.Time {
	b.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-rec.starts:
			if got == name {
				return time.Now()
			}
		case <-timeout:
			b.Fatalf("%s was not reconciled within 30 s", name)
		}
	}
}

// BenchmarkVersionStreamReady measures the time from a VersionStream's 201 to the API showing it Ready, with the
// version resolver on the watch (or the poll at 5 s) and the Cincinnati simulator; the creates come one at a time
// and read the stream every 2 ms. Reported: p50-ms and p99-ms.
//
//	go test ./test/integration -run '^$' -bench 'VersionStreamReady/source=watch' -benchtime 100x
//	go test ./test/integration -run '^$' -bench 'VersionStreamReady/source=poll' -benchtime 20x
func BenchmarkVersionStreamReady(b *testing.B) {
	for _, src := range benchSources() {
		if src.name == "nats" {
			continue // the resolver's source is the watch by default; NATS is measured above
		}
		b.Run("source="+src.name, func(b *testing.B) {
			s := startServerWith(b, map[string][]string{"versionstream": {versionresolver.Name}})
			sim := startSim(b, cincinnatisim.Series{Minors: []string{"4.16"}, Patches: 3})
			startResolverTuned(b, s, sim, versionresolver.Options{CincinnatiURL: sim.url(), CincinnatiTimeout: time.Second,
				RecheckAfter: time.Hour, RetryAfter: time.Hour, GraphCacheTTL: 30 * time.Second}, src.tune("", ""))
			waitForReport(b, s, streamNamed(b, s, defaultStream), "the seeded stream resolved", resolvedTo("4.16.2"))
			latencies := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				if src.name == "poll-5s" {
					time.Sleep(rand.N(adapter.DefaultPollInterval)) //nolint:gosec // a random phase, not a secret
				}
				stream := createStream(b, s, fmt.Sprintf("ready-%d", i), api.VersionStreamSpec{TargetVersion: "4.16"})
				created := time.Now()
				deadline := created.Add(30 * time.Second)
				for {
					resp, err := s.GetVersionStreamWithResponse(ctxFor(b), stream.Id)
					require.NoError(b, err)
					require.Equal(b, http.StatusOK, resp.StatusCode())
					if resp.JSON200.Status.Phase == api.ResourceStatusPhaseReady {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("%s not Ready within 30 s", stream.Name)
					}
					time.Sleep(2 * time.Millisecond)
				}
				latencies = append(latencies, time.Since(created))
			}
			b.StopTimer()
			reportPercentiles(b, latencies)
		})
	}
}

func reportPercentiles(b *testing.B, latencies []time.Duration) {
	b.Helper()
	slices.Sort(latencies)
	at := func(p float64) float64 {
		i := min(len(latencies)-1, int(p*float64(len(latencies))))
		return float64(latencies[i].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(float64(latencies[len(latencies)-1].Microseconds())/1000, "max-ms")
}
