package aggregate_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/aggregate"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// randomInput draws an input over a small name and generation space, so that collisions (same adapter required
// and reporting, same generation) are common.
func randomInput(rng *rand.Rand) aggregate.Input {
	names := []string{"a", "b", "c", "d", "e", "f"}
	statuses := []conditions.Status{T, F, U}
	gen := int64(1 + rng.Intn(4))
	in := aggregate.Input{Generation: gen, Deleting: rng.Intn(5) == 0, Now: now()}
	perm := rng.Perm(len(names))
	in.Required = make([]string, rng.Intn(5))
	for i := range in.Required {
		in.Required[i] = names[perm[i]]
	}
	for _, name := range names {
		if rng.Intn(4) == 0 {
			continue // never reported
		}
		r := aggregate.Report{Adapter: name, ObservedGeneration: 1 + rng.Int63n(gen), ObservedTime: at(1)}
		if rng.Intn(10) != 0 { // sometimes no Available at all
			r.Conditions = append(r.Conditions, cond(conditions.Available, statuses[rng.Intn(3)], "R"))
		}
		if rng.Intn(2) == 0 {
			r.Conditions = append(r.Conditions, cond(conditions.Health, statuses[rng.Intn(3)], "H"))
		}
		in.Reports = append(in.Reports, r)
	}
	rng.Shuffle(len(in.Reports), func(i, j int) { in.Reports[i], in.Reports[j] = in.Reports[j], in.Reports[i] })
	return in
}

func TestComputeProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := range 2000 {
		in := randomInput(rng)
		got := aggregate.Compute(in)
		msg := fmt.Sprintf("case %d: %+v", i, in)

		require.NotNil(t, got.Conditions, msg)
		if len(in.Required) == 0 {
			require.Empty(t, got.Conditions, msg)
			if !in.Deleting {
				require.Equal(t, conditions.PhaseReady, got.Phase, msg)
			}
			continue
		}
		require.Len(t, got.Conditions, 2+len(in.Required), msg)
		ready, available := got.Conditions[0], got.Conditions[1]
		require.Equal(t, conditions.Ready, ready.Type, msg)
		require.Equal(t, conditions.Available, available.Type, msg)
		require.Equal(t, in.Generation, ready.ObservedGeneration, msg)
		require.LessOrEqual(t, available.ObservedGeneration, in.Generation, msg)
		if ready.Status == T {
			require.Equal(t, T, available.Status, msg)
		}
		if in.Deleting {
			require.Equal(t, conditions.PhaseDeleting, got.Phase, msg)
		} else {
			require.Equal(t, ready.Status == T, got.Phase == conditions.PhaseReady, msg)
		}
		for j, c := range got.Conditions {
			require.Contains(t, []conditions.Status{T, F, U}, c.Status, msg)
			require.Equal(t, in.Now, c.LastUpdatedTime, msg)
			if j >= 2 {
				require.Equal(t, conditions.AdapterAvailable(in.Required[j-2]), c.Type, msg)
			}
		}

		// Same input, permuted reports, previous fed back: same statuses, and transition times carried over.
		again := in
		again.Reports = append([]aggregate.Report(nil), in.Reports...)
		rng.Shuffle(len(again.Reports), func(i, j int) { again.Reports[i], again.Reports[j] = again.Reports[j], again.Reports[i] })
		again.Previous = got.Conditions
		again.Now = in.Now.Add(time.Minute)
		next := aggregate.Compute(again)
		require.Equal(t, got.Phase, next.Phase, msg)
		for j := range got.Conditions {
			g, nx := got.Conditions[j], next.Conditions[j]
			require.Equal(t, g.LastTransitionTime, nx.LastTransitionTime, msg)
			g.LastUpdatedTime, nx.LastUpdatedTime = time.Time{}, time.Time{}
			require.Equal(t, g, nx, msg)
		}
	}
}

func BenchmarkCompute(b *testing.B) {
	required := []string{"version-resolver", "hostedcluster-applier", "dns-sync", "nodepool-scaler", "cert-issuer"}
	in := aggregate.Input{Generation: 4, Required: required, Now: now()}
	for i, name := range required {
		// A realistic mix: one adapter behind, one with a failing Health, the rest healthy at the current generation.
		gen, avail := int64(4), T
		switch i {
		case 1:
			gen = 3
		case 3:
			avail = F
		}
		in.Reports = append(in.Reports, report(name, gen, avail, "R",
			cond(conditions.Health, avail, "H"), cond(conditions.Applied, T, "A")))
	}
	in.Reports = append(in.Reports, report("not-required", 4, T, "R"))
	in.Previous = aggregate.Compute(in).Conditions

	b.ReportAllocs()
	for b.Loop() {
		aggregate.Compute(in)
	}
}
