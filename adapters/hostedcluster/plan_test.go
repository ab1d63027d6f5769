package hostedcluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/internal/schedule"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

const (
	imageOld     = "quay.io/openshift-release-dev/ocp-release:4.16.1-x86_64"
	imagePulled  = "quay.io/openshift-release-dev/ocp-release:4.16.0-x86_64"
	admittedID   = "0193a4c4-0000-7000-8000-000000000001"
	riskURL      = "https://issues.redhat.com/browse/ARO-1"
	canaryLabel  = "tier"
	riskName     = "AROBrokenDNS"
	stageCanary  = "canary"
	stageTheRest = "rest"
)

// streamFixture is a stream whose target is 4.16.3 (imageB), whose rollout is in its canary stage with one cluster
// admitted, whose new clusters install 4.16.2 (imageA), and whose graph reaches 4.16.3 from 4.16.2 directly and
// from 4.16.1 only through a conditional edge; 4.16.0 was pulled.
func streamFixture(tb testing.TB) StreamRollout {
	tb.Helper()
	policy, err := rollout.PolicyOf([]byte(`{"rollout":{"stages":[{"name":"canary","selector":"tier=canary","max_at_once":1},{"name":"rest"}]}}`))
	require.NoError(tb, err)
	return StreamRollout{Policy: policy, Report: &rollout.Report{
		ReleaseImage: imageB, ResolvedVersion: "4.16.3", InstallImage: imageA, InstallVersion: "4.16.2",
		Graph: &rollout.Graph{Target: "4.16.3",
			Releases: map[string]string{"4.16.1": imageOld, "4.16.2": imageA, "4.16.3": imageB},
			Paths: map[string]rollout.Hops{
				"4.16.2": {To: "4.16.3"},
				"4.16.1": {Conditional: []rollout.ConditionalHop{{To: "4.16.3", Risks: []string{riskName}}}},
				"4.16.3": {},
			},
			Risks: map[string]rollout.Risk{riskName: {URL: riskURL, Message: "DNS breaks on ARO"}},
		},
		Rollout: &rollout.Status{Release: "4.16.3", State: rollout.StateProgressing, Revision: 3,
			Stages:   []rollout.StageStatus{{Name: stageCanary, State: rollout.StageActive, Clusters: 2}, {Name: stageTheRest, State: rollout.StageWaiting, Clusters: 5}},
			Admitted: map[string]rollout.Admission{admittedID: {Version: "4.16.3", Admitted: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}}},
	}}
}

// running is a HostedCluster the applier wrote at image and version, completed.
func running(image, version string) *unstructured.Unstructured {
	hc := hostedCluster(image, "True", "False", entry("Completed", image, version))
	hc.SetAnnotations(map[string]string{AnnotationReleaseVersion: version})
	return hc
}

// The applier applies the rollout's verdict and explains it: a new cluster installs the install release, an
// admitted one moves (in its window), the others keep their image and say what holds or blocks them.
func TestPlanFollowsTheRollout(t *testing.T) {
	weekend, err := schedule.Parse("UTC", []schedule.WindowSpec{{Days: []string{"Saturday"}, Start: "02:00", Duration: "4h"}}, nil)
	require.NoError(t, err)
	monday := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	legacy := streamFixture(t)
	legacy.Report.Graph, legacy.Report.Rollout = nil, nil
	tests := []struct {
		name    string
		stream  StreamRollout
		cluster rollout.Cluster
		live    *unstructured.Unstructured
		sched   *schedule.Schedule
		// What is applied, and what is reported.
		image, version   string
		pending, blocked conditions.Reported
		held             string
		messageHas       string
	}{
		{name: "a new cluster installs the install release, not the target still in its canary",
			cluster: rollout.Cluster{ID: "new"}, image: imageA, version: "4.16.2",
			pending: reported(ConditionUpgradePending, conditions.False, ReasonAtReleaseImage),
			blocked: reported(ConditionUpgradeBlocked, conditions.False, ReasonUpdatePathFound)},
		{name: "an admitted cluster moves",
			cluster: rollout.Cluster{ID: admittedID, Labels: map[string]string{canaryLabel: "canary"}}, live: running(imageA, "4.16.2"),
			image: imageB, version: "4.16.3",
			pending: reported(ConditionUpgradePending, conditions.False, ReasonRolling),
			blocked: reported(ConditionUpgradeBlocked, conditions.False, ReasonUpdatePathFound)},
		{name: "an admitted cluster still waits for its window",
			cluster: rollout.Cluster{ID: admittedID}, live: running(imageA, "4.16.2"), sched: weekend,
			image: imageA, version: "4.16.2", held: ReasonOutsideUpgradeWindow,
			pending: reported(ConditionUpgradePending, conditions.True, ReasonOutsideUpgradeWindow),
			blocked: reported(ConditionUpgradeBlocked, conditions.False, ReasonUpdatePathFound)},
		{name: "a later stage's cluster waits for the canary",
			cluster: rollout.Cluster{ID: "later"}, live: running(imageA, "4.16.2"),
			image: imageA, version: "4.16.2", held: rollout.HeldWaitingForStage, messageHas: "waits for stage canary",
			pending: reported(ConditionUpgradePending, conditions.True, rollout.HeldWaitingForStage),
			blocked: reported(ConditionUpgradeBlocked, conditions.False, ReasonUpdatePathFound)},
		{name: "a canary not admitted waits for its turn",
			cluster: rollout.Cluster{ID: "canary-2", Labels: map[string]string{canaryLabel: "canary"}}, live: running(imageA, "4.16.2"),
			image: imageA, version: "4.16.2", held: rollout.HeldWaitingForTurn,
			pending: reported(ConditionUpgradePending, conditions.True, rollout.HeldWaitingForTurn),
			blocked: reported(ConditionUpgradeBlocked, conditions.False, ReasonUpdatePathFound)},
		{name: "a risk nobody accepted blocks, with its URL",
			cluster: rollout.Cluster{ID: "risky"}, live: running(imageOld, "4.16.1"),
			image: imageOld, version: "4.16.1", held: rollout.BlockedRiskNotAccepted, messageHas: riskURL,
			pending: reported(ConditionUpgradePending, conditions.False, ReasonAtReleaseImage),
			blocked: reported(ConditionUpgradeBlocked, conditions.True, rollout.BlockedRiskNotAccepted)},
		{name: "an accepted risk opens the path; the cluster then waits for its stage",
			cluster: rollout.Cluster{ID: "accepting", AcceptedRisks: []string{riskName}}, live: running(imageOld, "4.16.1"),
			image: imageOld, version: "4.16.1", held: rollout.HeldWaitingForStage,
			pending: reported(ConditionUpgradePending, conditions.True, rollout.HeldWaitingForStage),
			blocked: reported(ConditionUpgradeBlocked, conditions.False, ReasonUpdatePathFound)},
		{name: "a pulled release has no way out",
			cluster: rollout.Cluster{ID: "pulled"}, live: running(imagePulled, "4.16.0"),
			image: imagePulled, version: "4.16.0", held: rollout.BlockedNotInGraph, messageHas: "pulled",
			pending: reported(ConditionUpgradePending, conditions.False, ReasonAtReleaseImage),
			blocked: reported(ConditionUpgradeBlocked, conditions.True, rollout.BlockedNotInGraph)},
		{name: "at the target",
			cluster: rollout.Cluster{ID: "done"}, live: running(imageB, "4.16.3"), image: imageB, version: "4.16.3",
			pending: reported(ConditionUpgradePending, conditions.False, ReasonAtReleaseImage),
			blocked: reported(ConditionUpgradeBlocked, conditions.False, ReasonAtTargetRelease)},
		{name: "a resolver from before rollouts: the stream's release, as before",
			stream: legacy, cluster: rollout.Cluster{ID: "any"}, live: running(imageA, "4.16.2"), image: imageB, version: "4.16.3",
			pending: reported(ConditionUpgradePending, conditions.False, ReasonRolling),
			blocked: reported(ConditionUpgradeBlocked, conditions.False, ReasonUpdatePathFound)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := tt.stream
			if stream.Report == nil {
				stream = streamFixture(t)
			}
			c := tt.cluster
			c.Installed, c.Running = tt.live != nil, ""
			if tt.live != nil {
				o := observe(tt.live)
				c.Running = o.currentVersion()
			}
			p := planFor(stream, c, tt.live, tt.sched, monday)
			require.Equal(t, tt.image, p.Roll.Image, "image applied")
			require.Equal(t, tt.version, p.Version, "the version annotation goes with the image")
			// What HyperShift shows once the plan is applied: the image written and, when it changed, a rollout
			// started (a Partial history entry).
			after := &unstructured.Unstructured{Object: map[string]any{}}
			if tt.live != nil {
				after = tt.live.DeepCopy()
				if observe(tt.live).ReleaseImage != p.Roll.Image {
					after = hostedCluster(p.Roll.Image, "True", "True", entry("Partial", p.Roll.Image, p.Version), entry("Completed", imageA, "4.16.2"))
				}
			}
			require.NoError(t, unstructured.SetNestedField(after.Object, p.Roll.Image, "spec", "release", "image"))
			out := outcome("clusters/c", p, observe(after))
			pending, blocked := conditionOf(out.Conditions, ConditionUpgradePending), conditionOf(out.Conditions, ConditionUpgradeBlocked)
			require.Equal(t, tt.pending, conditions.Reported{Type: pending.Type, Status: pending.Status, Reason: pending.Reason}, pending.Message)
			require.Equal(t, tt.blocked, conditions.Reported{Type: blocked.Type, Status: blocked.Status, Reason: blocked.Reason}, blocked.Message)
			require.NotEmpty(t, pending.Message)
			require.NotEmpty(t, blocked.Message)
			require.Equal(t, tt.held, out.Data[DataHeldReason])
			require.Equal(t, imageB, out.Data[DataDesiredReleaseImage], "the stream's target, whatever the cluster is given")
			require.Equal(t, stream.Report.ResolvedVersion, out.Data[DataTargetVersion])
			if tt.messageHas != "" {
				require.Contains(t, pending.Message+blocked.Message, tt.messageHas)
			}
		})
	}
}

func reported(typ string, status conditions.Status, reason string) conditions.Reported {
	return conditions.Reported{Type: typ, Status: status, Reason: reason}
}

// The conditions from a verdict alone: a blocked verdict and a held one each say so with the verdict's reason and
// message, and held_reason carries the reason for the CLI's column.
func TestConditionsFromVerdicts(t *testing.T) {
	idle := Observed{History: []HistoryEntry{{State: "Completed", Image: imageA, Version: "4.16.2"}}, ReleaseImage: imageA}
	keep := Rollout{Image: imageA, Target: imageA}
	tests := []struct {
		name             string
		plan             Plan
		pending, blocked conditions.Reported
		held             string
	}{
		{name: "no path", plan: Plan{TargetVersion: "4.16.3", Roll: keep,
			Verdict: rollout.Verdict{Blocked: rollout.BlockedNoUpdatePath, Message: "no update path"}},
			pending: conditions.Reported{Type: ConditionUpgradePending, Status: conditions.False, Reason: ReasonAtReleaseImage},
			blocked: conditions.Reported{Type: ConditionUpgradeBlocked, Status: conditions.True, Reason: rollout.BlockedNoUpdatePath, Message: "no update path"},
			held:    rollout.BlockedNoUpdatePath},
		{name: "path unknown", plan: Plan{TargetVersion: "4.16.3", Roll: keep,
			Verdict: rollout.Verdict{Blocked: rollout.BlockedPathUnknown, Message: "too many versions"}},
			pending: conditions.Reported{Type: ConditionUpgradePending, Status: conditions.False, Reason: ReasonAtReleaseImage},
			blocked: conditions.Reported{Type: ConditionUpgradeBlocked, Status: conditions.True, Reason: rollout.BlockedPathUnknown, Message: "too many versions"},
			held:    rollout.BlockedPathUnknown},
		{name: "rollout paused", plan: Plan{TargetVersion: "4.16.3", Roll: keep,
			Verdict: rollout.Verdict{Held: rollout.HeldRolloutPaused, Message: "paused"}},
			pending: conditions.Reported{Type: ConditionUpgradePending, Status: conditions.True, Reason: rollout.HeldRolloutPaused, Message: "paused"},
			blocked: conditions.Reported{Type: ConditionUpgradeBlocked, Status: conditions.False, Reason: ReasonUpdatePathFound},
			held:    rollout.HeldRolloutPaused},
		{name: "failed this release", plan: Plan{TargetVersion: "4.16.3", Roll: keep,
			Verdict: rollout.Verdict{Held: rollout.HeldFailed, Message: "failed"}},
			pending: conditions.Reported{Type: ConditionUpgradePending, Status: conditions.True, Reason: rollout.HeldFailed, Message: "failed"},
			blocked: conditions.Reported{Type: ConditionUpgradeBlocked, Status: conditions.False, Reason: ReasonUpdatePathFound},
			held:    rollout.HeldFailed},
		{name: "at the target", plan: Plan{TargetVersion: "4.16.2", Roll: keep},
			pending: conditions.Reported{Type: ConditionUpgradePending, Status: conditions.False, Reason: ReasonAtReleaseImage},
			blocked: conditions.Reported{Type: ConditionUpgradeBlocked, Status: conditions.False, Reason: ReasonAtTargetRelease}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pending, blocked := upgradePending(tt.plan, idle), upgradeBlocked(tt.plan, idle)
			if tt.pending.Message == "" {
				pending.Message = ""
			}
			if tt.blocked.Message == "" {
				blocked.Message = ""
			}
			require.Equal(t, tt.pending, pending)
			require.Equal(t, tt.blocked, blocked)
			require.Equal(t, tt.held, heldReason(tt.plan))
		})
	}
}
