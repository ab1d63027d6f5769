package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/kinds"
	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// The write benchmarks run the service's write paths on PostgreSQL, one caller at a time, and report, besides
// the wall time (mostly PostgreSQL's), this process's CPU per write (cpu-ms/op), which is what the API spends.

var benchAdapters = []string{"load-a", "load-b", "load-c"}

type writeBench struct {
	svc *resource.Service
	set *kinds.Set
	ctx context.Context
}

func newWriteBench(b *testing.B) *writeBench {
	b.Helper()
	set := kindsRequiring(b, map[string][]string{"cluster": benchAdapters})
	db := harness.OpenGorm(b, harness.NewDatabase(b))
	w := &writeBench{svc: resource.NewService(postgres.NewStore(db, set.All), set.All), set: set,
		ctx: resource.WithCaller(context.Background(), resource.Caller{Name: "bench", Admin: true})}
	_, err := w.svc.Create(w.ctx, set.VersionStream, "", resource.CreateInput{Name: "bench", Spec: json.RawMessage(`{"target_version":"4.16"}`)})
	require.NoError(b, err)
	return w
}

func (w *writeBench) createCluster(b *testing.B, name string) *resource.Resource {
	r, err := w.svc.Create(w.ctx, w.set.Cluster, "", resource.CreateInput{Name: name, Labels: map[string]string{"env": "prod", "shard": "7"},
		Spec: json.RawMessage(`{"version_stream":"bench"}`)})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// BenchmarkCreate creates clusters (validated and defaulted spec, the row, its placeholders and its event).
func BenchmarkCreate(b *testing.B) {
	w := newWriteBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime(b)
	for i := range b.N {
		w.createCluster(b, fmt.Sprintf("c%d-%d", b.N, i))
	}
	reportCPU(b, start)
}

// BenchmarkStatusWrite posts the three required adapters' reports about 100 clusters in turn, each report new
// (its message moves) or, for "unchanged", the same as the stored one.
func BenchmarkStatusWrite(b *testing.B) {
	for _, unchanged := range []bool{false, true} {
		name := "changed"
		if unchanged {
			name = "unchanged"
		}
		b.Run(name, func(b *testing.B) {
			w := newWriteBench(b)
			w.svc.SuppressUnchangedReports(time.Hour)
			seen := &outcomes{}
			w.svc.Observe(seen)
			clusters := make([]*resource.Resource, 100)
			for i := range clusters {
				clusters[i] = w.createCluster(b, fmt.Sprintf("cl-%d", i))
			}
			seq := 0
			report := func(i int) (string, conditions.Report) {
				message := "stable-4.16/amd64 resolves to 4.16.3"
				seq++
				if !unchanged {
					message = fmt.Sprintf("%s (%d)", message, seq)
				}
				return clusters[i%len(clusters)].ID, conditions.Report{Adapter: benchAdapters[i/len(clusters)%len(benchAdapters)],
					ObservedGeneration: 1, ObservedTime: time.Now(),
					Conditions: []conditions.Reported{{Type: conditions.Available, Status: conditions.True, Reason: "Resolved", Message: message},
						{Type: "Applied", Status: conditions.True, Reason: "Reconciled"}, {Type: "Health", Status: conditions.True, Reason: "Reconciled"}},
					Data:     json.RawMessage(`{"release_image":"quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64","resolved_version":"4.16.3"}`),
					Metadata: json.RawMessage(`{"replica":"resolver-0"}`)}
			}
			for i := range len(clusters) * len(benchAdapters) { // every adapter has reported once
				id, rep := report(i)
				_, _, err := w.svc.PutStatus(w.ctx, w.set.Cluster, "", id, rep)
				require.NoError(b, err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := cpuTime(b)
			for i := range b.N {
				id, rep := report(i)
				if _, _, err := w.svc.PutStatus(w.ctx, w.set.Cluster, "", id, rep); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, start)
			if want := map[bool]string{false: "updated", true: "unchanged"}[unchanged]; seen.last() != want {
				b.Fatalf("the last report was %s, not %s", seen.last(), want)
			}
		})
	}
}
