package aggregate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/aggregate"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

const (
	T = conditions.True
	F = conditions.False
	U = conditions.Unknown
)

// at returns a fixed instant, minutes after an arbitrary epoch; tests never read the clock.
func at(minutes int) time.Time {
	return time.Date(2025, 6, 1, 12, minutes, 0, 0, time.UTC)
}

// now is the Now of every Compute call in the table.
func now() time.Time { return at(30) }

func cond(typ string, status conditions.Status, reason string) conditions.Condition {
	return conditions.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message"}
}

// report builds an adapter report with the given Available status (and reason) plus any extra conditions.
func report(adapter string, gen int64, available conditions.Status, reason string, extra ...conditions.Condition) aggregate.Report {
	return aggregate.Report{
		Adapter:            adapter,
		ObservedGeneration: gen,
		ObservedTime:       at(int(gen)),
		Conditions:         append([]conditions.Condition{cond(conditions.Available, available, reason)}, extra...),
	}
}

// want builds an expected aggregated condition stamped at now(), with a last transition at ltt.
func want(typ string, status conditions.Status, reason, message string, gen int64, ltt time.Time) conditions.Condition {
	return conditions.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: gen,
		LastTransitionTime: ltt, LastUpdatedTime: now(),
	}
}

// mirror is the expected per-adapter condition of an adapter whose report() had this status and reason.
func mirror(adapter string, status conditions.Status, reason string, gen int64) conditions.Condition {
	return want(conditions.AdapterAvailable(adapter), status, reason, reason+" message", gen, now())
}

func notReported(adapter string) conditions.Condition {
	return want(conditions.AdapterAvailable(adapter), U, conditions.ReasonNotReported,
		"adapter "+adapter+" has not reported", 0, now())
}

func TestCompute(t *testing.T) {
	n := now()
	allReady := func(gen int64, ltt time.Time, adapters ...string) conditions.Condition {
		return want(conditions.Ready, T, conditions.ReasonAllAdaptersReady,
			fmt.Sprintf("all %d required adapters are Available at generation %d", len(adapters), gen), gen, ltt)
	}
	allAvailable := func(gen int64, ltt time.Time, adapters ...string) conditions.Condition {
		return want(conditions.Available, T, conditions.ReasonAllAdaptersAvailable,
			fmt.Sprintf("all %d required adapters are Available", len(adapters)), gen, ltt)
	}

	tests := []struct {
		name string
		in   aggregate.Input
		want aggregate.Result
	}{
		{
			name: "no required adapters: no conditions, Ready",
			in:   aggregate.Input{Generation: 1, Now: n},
			want: aggregate.Result{Phase: conditions.PhaseReady, Conditions: []conditions.Condition{}},
		},
		{
			name: "no required adapters: reports of other adapters ignored",
			in: aggregate.Input{Generation: 2, Now: n, Reports: []aggregate.Report{report("x", 1, F, "Down",
				cond(conditions.Health, F, "Sick"))}},
			want: aggregate.Result{Phase: conditions.PhaseReady, Conditions: []conditions.Condition{}},
		},
		{
			name: "no required adapters, deleting",
			in:   aggregate.Input{Generation: 2, Deleting: true, Now: n},
			want: aggregate.Result{Phase: conditions.PhaseDeleting, Conditions: []conditions.Condition{}},
		},
		{
			name: "all required adapters Available at current generation",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a", "b"}, Now: n,
				Reports: []aggregate.Report{report("b", 2, T, "Up"), report("a", 2, T, "Fine")},
			},
			want: aggregate.Result{Phase: conditions.PhaseReady, Conditions: []conditions.Condition{
				allReady(2, n, "a", "b"),
				allAvailable(2, n, "a", "b"),
				mirror("a", T, "Fine", 2),
				mirror("b", T, "Up", 2),
			}},
		},
		{
			name: "mixed generations: not Ready, still Available at the lowest generation",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a", "b"}, Now: n,
				Reports: []aggregate.Report{report("a", 2, T, "Up"), report("b", 1, T, "Up")},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: b (observed generation 1 of 2)", 2, n),
				allAvailable(1, n, "a", "b"),
				mirror("a", T, "Up", 2),
				mirror("b", T, "Up", 1),
			}},
		},
		{
			name: "all behind the generation: Pending though Available",
			in: aggregate.Input{
				Generation: 3, Required: []string{"a", "b"}, Now: n,
				Reports: []aggregate.Report{report("a", 2, T, "Up"), report("b", 1, T, "Up")},
			},
			want: aggregate.Result{Phase: conditions.PhasePending, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: a (observed generation 2 of 3), b (observed generation 1 of 3)", 3, n),
				allAvailable(1, n, "a", "b"),
				mirror("a", T, "Up", 2),
				mirror("b", T, "Up", 1),
			}},
		},
		{
			name: "one adapter missing",
			in: aggregate.Input{
				Generation: 1, Required: []string{"a", "b"}, Now: n,
				Reports: []aggregate.Report{report("a", 1, T, "Up")},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersMissing, "no report from: b", 1, n),
				want(conditions.Available, F, conditions.ReasonAdaptersMissing, "no report from: b", 0, n),
				mirror("a", T, "Up", 1),
				notReported("b"),
			}},
		},
		{
			name: "no reports at all: Pending",
			in:   aggregate.Input{Generation: 1, Required: []string{"a", "b"}, Now: n},
			want: aggregate.Result{Phase: conditions.PhasePending, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersMissing, "no report from: a, b", 1, n),
				want(conditions.Available, F, conditions.ReasonAdaptersMissing, "no report from: a, b", 0, n),
				notReported("a"),
				notReported("b"),
			}},
		},
		{
			name: "missing and not ready: AdaptersMissing naming both groups",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a", "b", "c"}, Now: n,
				Reports: []aggregate.Report{report("a", 2, T, "Up"), report("b", 1, F, "Boom")},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersMissing,
					"no report from: c; not ready: b (observed generation 1 of 2, Available=False: Boom)", 2, n),
				want(conditions.Available, F, conditions.ReasonAdaptersMissing,
					"no report from: c; unavailable: b (Available=False: Boom)", 0, n),
				mirror("a", T, "Up", 2),
				mirror("b", F, "Boom", 1),
				notReported("c"),
			}},
		},
		{
			name: "Available=False without Health at current generation: Progressing",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a", "b"}, Now: n,
				Reports: []aggregate.Report{report("a", 2, F, "Boom"), report("b", 2, T, "Up")},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: a (Available=False: Boom)", 2, n),
				want(conditions.Available, F, conditions.ReasonAdaptersUnavailable,
					"unavailable: a (Available=False: Boom)", 2, n),
				mirror("a", F, "Boom", 2),
				mirror("b", T, "Up", 2),
			}},
		},
		{
			name: "Available=False and Health=False at current generation: Degraded",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a", "b"}, Now: n,
				Reports: []aggregate.Report{
					report("a", 2, F, "Boom", cond(conditions.Health, F, "Sick")),
					report("b", 2, T, "Up"),
				},
			},
			want: aggregate.Result{Phase: conditions.PhaseDegraded, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: a (Available=False: Boom)", 2, n),
				want(conditions.Available, F, conditions.ReasonAdaptersUnavailable,
					"unavailable: a (Available=False: Boom)", 2, n),
				mirror("a", F, "Boom", 2),
				mirror("b", T, "Up", 2),
			}},
		},
		{
			name: "Available=False and Health=True at current generation: not Degraded",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a"}, Now: n,
				Reports: []aggregate.Report{report("a", 2, F, "Boom", cond(conditions.Health, T, "Fine"))},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: a (Available=False: Boom)", 2, n),
				want(conditions.Available, F, conditions.ReasonAdaptersUnavailable,
					"unavailable: a (Available=False: Boom)", 2, n),
				mirror("a", F, "Boom", 2),
			}},
		},
		{
			name: "Health=False with Available=True at current generation: not Degraded",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a", "b"}, Now: n,
				Reports: []aggregate.Report{
					report("a", 2, T, "Up", cond(conditions.Health, F, "Sick")),
					report("b", 1, T, "Up"),
				},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: b (observed generation 1 of 2)", 2, n),
				allAvailable(1, n, "a", "b"),
				mirror("a", T, "Up", 2),
				mirror("b", T, "Up", 1),
			}},
		},
		{
			name: "Available=False and Health=False at an old generation: not Degraded",
			in: aggregate.Input{
				Generation: 3, Required: []string{"a"}, Now: n,
				Reports: []aggregate.Report{report("a", 2, F, "Boom", cond(conditions.Health, F, "Sick"))},
			},
			want: aggregate.Result{Phase: conditions.PhasePending, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: a (observed generation 2 of 3, Available=False: Boom)", 3, n),
				want(conditions.Available, F, conditions.ReasonAdaptersUnavailable,
					"unavailable: a (Available=False: Boom)", 2, n),
				mirror("a", F, "Boom", 2),
			}},
		},
		{
			name: "Available=Unknown is not available",
			in: aggregate.Input{
				Generation: 1, Required: []string{"a"}, Now: n,
				Reports: []aggregate.Report{report("a", 1, U, "Checking", cond(conditions.Health, F, "Sick"))},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: a (Available=Unknown: Checking)", 1, n),
				want(conditions.Available, F, conditions.ReasonAdaptersUnavailable,
					"unavailable: a (Available=Unknown: Checking)", 1, n),
				mirror("a", U, "Checking", 1),
			}},
		},
		{
			name: "Available=False without a reason",
			in: aggregate.Input{
				Generation: 1, Required: []string{"a"}, Now: n,
				Reports: []aggregate.Report{{Adapter: "a", ObservedGeneration: 1, Conditions: []conditions.Condition{
					{Type: conditions.Available, Status: F},
				}}},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady, "not ready: a (Available=False)", 1, n),
				want(conditions.Available, F, conditions.ReasonAdaptersUnavailable, "unavailable: a (Available=False)", 1, n),
				want("AAvailable", F, "", "", 1, n),
			}},
		},
		{
			name: "report without an Available condition counts as Unknown",
			in: aggregate.Input{
				Generation: 1, Required: []string{"a"}, Now: n,
				Reports: []aggregate.Report{{Adapter: "a", ObservedGeneration: 1, Conditions: []conditions.Condition{
					cond(conditions.Applied, T, "Applied"),
				}}},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: a (Available=Unknown: no Available condition)", 1, n),
				want(conditions.Available, F, conditions.ReasonAdaptersUnavailable,
					"unavailable: a (Available=Unknown: no Available condition)", 1, n),
				want("AAvailable", U, conditions.ReasonAvailableConditionMissing,
					"the report of adapter a has no Available condition", 1, n),
			}},
		},
		{
			name: "report with an invalid Available status counts as Unknown",
			in: aggregate.Input{
				Generation: 1, Required: []string{"a"}, Now: n,
				Reports: []aggregate.Report{report("a", 1, "true", "Odd")},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: a (Available=Unknown: Odd)", 1, n),
				want(conditions.Available, F, conditions.ReasonAdaptersUnavailable,
					"unavailable: a (Available=Unknown: Odd)", 1, n),
				mirror("a", U, "Odd", 1),
			}},
		},
		{
			name: "non-required adapters' reports are ignored",
			in: aggregate.Input{
				Generation: 1, Required: []string{"a"}, Now: n,
				Reports: []aggregate.Report{
					report("x", 1, F, "Boom", cond(conditions.Health, F, "Sick")),
					report("a", 1, T, "Up"),
					report("y", 1, U, "Dunno"),
				},
			},
			want: aggregate.Result{Phase: conditions.PhaseReady, Conditions: []conditions.Condition{
				allReady(1, n, "a"),
				allAvailable(1, n, "a"),
				mirror("a", T, "Up", 1),
			}},
		},
		{
			name: "deleting: phase Deleting, conditions still computed",
			in: aggregate.Input{
				Generation: 3, Deleting: true, Required: []string{"a"}, Now: n,
				Reports: []aggregate.Report{report("a", 2, T, "Up")},
			},
			want: aggregate.Result{Phase: conditions.PhaseDeleting, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: a (observed generation 2 of 3)", 3, n),
				allAvailable(2, n, "a"),
				mirror("a", T, "Up", 2),
			}},
		},
		{
			name: "deleting wins over Ready and Degraded",
			in: aggregate.Input{
				Generation: 3, Deleting: true, Required: []string{"a", "b"}, Now: n,
				Reports: []aggregate.Report{
					report("a", 3, F, "Boom", cond(conditions.Health, F, "Sick")),
					report("b", 3, T, "Up"),
				},
			},
			want: aggregate.Result{Phase: conditions.PhaseDeleting, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: a (Available=False: Boom)", 3, n),
				want(conditions.Available, F, conditions.ReasonAdaptersUnavailable,
					"unavailable: a (Available=False: Boom)", 3, n),
				mirror("a", F, "Boom", 3),
				mirror("b", T, "Up", 3),
			}},
		},
		{
			name: "last_transition_time kept when status unchanged, reset when flipped",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a", "b"}, Now: n,
				Reports: []aggregate.Report{report("a", 2, T, "Up"), report("b", 2, F, "Boom")},
				Previous: []conditions.Condition{
					// Ready was False and stays False (reason and message change): keep.
					{Type: conditions.Ready, Status: F, Reason: conditions.ReasonAdaptersMissing, LastTransitionTime: at(1)},
					// Available was True, now False: flip.
					{Type: conditions.Available, Status: T, LastTransitionTime: at(2)},
					// a stays True: keep.
					{Type: "AAvailable", Status: T, LastTransitionTime: at(3)},
					// b was Unknown (not reported), now False: flip.
					{Type: "BAvailable", Status: U, LastTransitionTime: at(4)},
					// A condition no longer produced is dropped.
					{Type: "OldAvailable", Status: T, LastTransitionTime: at(5)},
				},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersNotReady,
					"not ready: b (Available=False: Boom)", 2, at(1)),
				want(conditions.Available, F, conditions.ReasonAdaptersUnavailable,
					"unavailable: b (Available=False: Boom)", 2, n),
				want("AAvailable", T, "Up", "Up message", 2, at(3)),
				want("BAvailable", F, "Boom", "Boom message", 2, n),
			}},
		},
		{
			name: "Ready flips to True: new transition time; zero previous time not carried",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a"}, Now: n,
				Reports: []aggregate.Report{report("a", 2, T, "Up")},
				Previous: []conditions.Condition{
					{Type: conditions.Ready, Status: F, LastTransitionTime: at(1)},
					{Type: conditions.Available, Status: T},
					{Type: "AAvailable", Status: T, LastTransitionTime: at(3)},
				},
			},
			want: aggregate.Result{Phase: conditions.PhaseReady, Conditions: []conditions.Condition{
				allReady(2, n, "a"),
				allAvailable(2, n, "a"),
				want("AAvailable", T, "Up", "Up message", 2, at(3)),
			}},
		},
		{
			name: "per-adapter conditions and messages follow Required order; duplicates count once",
			in: aggregate.Input{
				Generation: 1, Required: []string{"zeta-applier", "alpha.resolver", "zeta-applier", "m_x"}, Now: n,
				Reports: []aggregate.Report{report("alpha.resolver", 1, F, "Boom")},
			},
			want: aggregate.Result{Phase: conditions.PhaseProgressing, Conditions: []conditions.Condition{
				want(conditions.Ready, F, conditions.ReasonAdaptersMissing,
					"no report from: zeta-applier, m_x; not ready: alpha.resolver (Available=False: Boom)", 1, n),
				want(conditions.Available, F, conditions.ReasonAdaptersMissing,
					"no report from: zeta-applier, m_x; unavailable: alpha.resolver (Available=False: Boom)", 0, n),
				notReported("zeta-applier"),
				want("AlphaResolverAvailable", F, "Boom", "Boom message", 1, n),
				notReported("m_x"),
			}},
		},
		{
			name: "several reports for one adapter: the highest generation wins",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a"}, Now: n,
				Reports: []aggregate.Report{report("a", 2, T, "Up"), report("a", 1, F, "Boom")},
			},
			want: aggregate.Result{Phase: conditions.PhaseReady, Conditions: []conditions.Condition{
				allReady(2, n, "a"),
				allAvailable(2, n, "a"),
				mirror("a", T, "Up", 2),
			}},
		},
		{
			name: "several reports for one adapter at one generation: the latest observed_time wins",
			in: aggregate.Input{
				Generation: 2, Required: []string{"a"}, Now: n,
				Reports: func() []aggregate.Report {
					older, newer := report("a", 2, F, "Boom"), report("a", 2, T, "Up")
					older.ObservedTime, newer.ObservedTime = at(10), at(11)
					return []aggregate.Report{older, newer}
				}(),
			},
			want: aggregate.Result{Phase: conditions.PhaseReady, Conditions: []conditions.Condition{
				allReady(2, n, "a"),
				allAvailable(2, n, "a"),
				mirror("a", T, "Up", 2),
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := aggregate.Compute(tt.in)
			require.Equal(t, tt.want, got)
			if len(tt.in.Reports) > 1 {
				// Report order must not matter.
				reversed := tt.in
				reversed.Reports = make([]aggregate.Report, len(tt.in.Reports))
				for i, r := range tt.in.Reports {
					reversed.Reports[len(tt.in.Reports)-1-i] = r
				}
				require.Equal(t, got, aggregate.Compute(reversed), "reports reversed")
			}
		})
	}
}

func TestFinalized(t *testing.T) {
	finalized := func(adapter string, gen int64, status conditions.Status) aggregate.Report {
		return report(adapter, gen, T, "Up", cond(conditions.Finalized, status, "Cleanup"))
	}
	tests := []struct {
		name string
		in   aggregate.Input
		want bool
	}{
		{
			name: "no required adapters",
			in:   aggregate.Input{Generation: 3, Deleting: true},
			want: true,
		},
		{
			name: "no required adapters, other adapters not finalized",
			in:   aggregate.Input{Generation: 3, Reports: []aggregate.Report{finalized("x", 3, F)}},
			want: true,
		},
		{
			name: "all Finalized=True at current generation",
			in: aggregate.Input{Generation: 3, Required: []string{"a", "b"},
				Reports: []aggregate.Report{finalized("a", 3, T), finalized("b", 3, T)}},
			want: true,
		},
		{
			name: "non-required adapter not finalized does not block",
			in: aggregate.Input{Generation: 3, Required: []string{"a"},
				Reports: []aggregate.Report{finalized("a", 3, T), finalized("x", 2, F)}},
			want: true,
		},
		{
			name: "Finalized=True at an old generation does not count",
			in: aggregate.Input{Generation: 3, Required: []string{"a", "b"},
				Reports: []aggregate.Report{finalized("a", 3, T), finalized("b", 2, T)}},
			want: false,
		},
		{
			name: "Finalized=False",
			in: aggregate.Input{Generation: 3, Required: []string{"a", "b"},
				Reports: []aggregate.Report{finalized("a", 3, T), finalized("b", 3, F)}},
			want: false,
		},
		{
			name: "Finalized=Unknown",
			in: aggregate.Input{Generation: 3, Required: []string{"a"},
				Reports: []aggregate.Report{finalized("a", 3, U)}},
			want: false,
		},
		{
			name: "no Finalized condition",
			in: aggregate.Input{Generation: 3, Required: []string{"a"},
				Reports: []aggregate.Report{report("a", 3, T, "Up")}},
			want: false,
		},
		{
			name: "required adapter missing",
			in: aggregate.Input{Generation: 3, Required: []string{"a", "b"},
				Reports: []aggregate.Report{finalized("a", 3, T)}},
			want: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, aggregate.Finalized(tt.in))
		})
	}
}
