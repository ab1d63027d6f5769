package hostedcluster

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/internal/schedule"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/pkg/rollout"
)

// Condition types the applier reports besides the runtime's. Progressing, Degraded and ValidReleaseImage mirror
// the HostedCluster's conditions of the same names; Available follows the HostedCluster's Available.
const (
	ConditionProgressing       = "Progressing"
	ConditionDegraded          = "Degraded"
	ConditionValidReleaseImage = "ValidReleaseImage"
	// ConditionUpgradePending is True while the stream's rollout has the cluster wait for a newer release: its
	// UpgradeSchedule is closed (OutsideUpgradeWindow), or the rollout holds it (rollout.HeldWaitingForStage,
	// HeldWaitingForTurn, HeldRolloutPaused, HeldFailed).
	ConditionUpgradePending = "UpgradePending"
	// ConditionUpgradeBlocked is True while the cluster cannot move towards its stream's target along the update
	// graph, with the reason of rollout.Hop.Blocked (NoUpdatePath, RiskNotAccepted, ReleaseNotInGraph, PathUnknown).
	ConditionUpgradeBlocked = "UpgradeBlocked"
	// ConditionReapplyPending is True while a change of the applier's own (not of the cluster's spec) waits for its
	// turn to be re-applied: such changes reach the fleet at --reapply-rate.
	ConditionReapplyPending = "ReapplyPending"
)

// Reasons of the applier's conditions and of Available.
const (
	ReasonWaitingForHostedCluster = "WaitingForHostedCluster" // applied; HyperShift has not reported yet
	ReasonReleaseImagePending     = "ReleaseImagePending"     // the stream has no resolved image yet
	ReasonVersionStreamNotFound   = "VersionStreamNotFound"
	ReasonScheduleNotFound        = "UpgradeScheduleNotFound"
	ReasonInvalidSpec             = "InvalidSpec"
	ReasonHostedClusterInvalid    = "HostedClusterInvalid"        // the management cluster refused the object (422)
	ReasonHostedClusterConflict   = "HostedClusterOwnedByAnother" // an object of that name is not this cluster's
	ReasonManagementCluster       = "ManagementClusterUnavailable"
	ReasonOutsideUpgradeWindow    = "OutsideUpgradeWindow"
	ReasonAtReleaseImage          = "AtReleaseImage"
	ReasonAtTargetRelease         = "AtTargetRelease" // UpgradeBlocked False: the cluster runs the stream's target
	ReasonUpdatePathFound         = "UpdatePathFound" // UpgradeBlocked False: the graph leads it towards the target
	ReasonRolling                 = "Rolling"
	ReasonNotReported             = "NotReportedByHostedCluster"
	ReasonHostedClusterDeleting   = "HostedClusterDeleting"
	ReasonDeleted                 = "Deleted"
	ReasonReapplyPaced            = "ReapplyPaced" // the applier's own change waits for the pacer
	ReasonApplied                 = "Applied"      // what the applier builds is applied
	// ReasonWaitingForPlacement: the cluster-placer has not placed the cluster on a management cluster yet.
	ReasonWaitingForPlacement = "WaitingForPlacement"
	// ReasonManagementClusterUnreachable (Available Unknown): the cluster's management cluster does not answer;
	// what HyperShift does there cannot be seen.
	ReasonManagementClusterUnreachable = "ManagementClusterUnreachable"
	// ReasonCacheStale (Available Unknown; on a ManagementCluster, Available False): the applier's watch cache
	// of the management cluster stopped following it (401, 403 or 404 on its list or watch, or a watch failing
	// for longer than staleAfter): what it holds would be reported as fresh, so nothing is.
	ReasonCacheStale = "ManagementClusterCacheStale"
	// ReasonManagementClusterNotFound: the placement names a ManagementCluster the API does not have.
	ReasonManagementClusterNotFound = "ManagementClusterNotFound"
	// ReasonHostedClusterMissing (Available False): the HostedCluster the applier made is gone, or being deleted,
	// and HyperFleet did not delete it. It is re-created only when the cluster's LabelRecreate asks (see
	// recreateAsked): a new HostedCluster is a new control plane with a new etcd, and the old one's nodes are
	// orphaned.
	ReasonHostedClusterMissing = "HostedClusterMissing"
	// ReasonConcurrentChange: an object changed between the applier's read and its write (a resourceVersion or
	// UID precondition failed); the next try reads it again.
	ReasonConcurrentChange = "ConcurrentChange"
)

// Condition types of the applier's report on a ManagementCluster, besides Available (True with the message
// "<hosted>/<max> hosted clusters").
const (
	// ConditionReachable says whether its kube-apiserver answers.
	ConditionReachable = "Reachable"
	// ConditionHyperShiftInstalled says whether it serves HyperShift's HostedCluster (hypershift.openshift.io/v1beta1).
	ConditionHyperShiftInstalled = "HyperShiftInstalled"
)

// Reasons of the applier's report on a ManagementCluster. CredentialsNotFound, CredentialsInvalid, Unreachable and
// HyperShiftNotInstalled are also Available's reasons when it is False; a cluster on such a management cluster
// reports ManagementClusterUnreachable, CredentialsNotFound or CredentialsInvalid.
const (
	ReasonServing                = "Serving"             // Available True: it takes HostedClusters
	ReasonReachable              = "Reachable"           // Reachable True
	ReasonUnreachable            = "Unreachable"         // Reachable False: its kube-apiserver did not answer
	ReasonCredentialsNotFound    = "CredentialsNotFound" // no file of that name in --management-cluster-credentials
	ReasonCredentialsInvalid     = "CredentialsInvalid"  // the file is no kubeconfig the applier can use
	ReasonHyperShiftInstalled    = "HostedClusterServed" // HyperShiftInstalled True
	ReasonHyperShiftNotInstalled = "HyperShiftNotInstalled"
	ReasonSyncing                = "Syncing" // reachable, but the watch of its HostedClusters has not listed them yet
)

// Keys of the report's data.
const (
	DataHostedCluster       = "hosted_cluster"        // namespace/name on the management cluster
	DataAppliedReleaseImage = "applied_release_image" // spec.release.image as applied
	DataDesiredReleaseImage = "desired_release_image" // the stream's image (differs while an upgrade waits)
	DataCurrentVersion      = "current_version"       // the newest Completed version in status.version.history
	DataUpgradeState        = "upgrade_state"         // the newest history entry's state: Partial or Completed
	DataUpgradeVersion      = "upgrade_version"       // the newest history entry's version (the one upgrade_state is of)
	DataAPIEndpoint         = "api_endpoint"          // status.controlPlaneEndpoint as host:port
	DataKubeconfigSecret    = "kubeconfig_secret"     //nolint:gosec // the name of a Secret, not a credential
	DataNextUpgradeWindow   = "next_upgrade_window"   // RFC 3339, while an upgrade waits for the schedule
	DataTargetVersion       = "target_version"        // the stream's target version
	DataManagementCluster   = "management_cluster"    // the ManagementCluster's name, when the applier serves many
	// DataHeldReason says in one word why the cluster is not moving to the target: a rollout.Blocked* or Held*
	// reason, or OutsideUpgradeWindow; empty when nothing holds it.
	DataHeldReason = "held_reason"
	// DataHostedClusterUID is the UID of the HostedCluster the applier made or adopted: carried from report to
	// report, it is how the applier knows, after a restart too, that the cluster had one (see presenceOf).
	DataHostedClusterUID = "hosted_cluster_uid"
	// DataRecreateToken is the value of the cluster's LabelRecreate the applier last saw with a HostedCluster in
	// place (or acted on): only another value asks for a re-creation.
	DataRecreateToken = "recreate_token"
)

// Keys of the data of the applier's report on a ManagementCluster.
const (
	DataHostedClusters    = "hosted_clusters"     // HostedClusters with the applier's cluster-id label on it
	DataMaxHostedClusters = "max_hosted_clusters" // spec.capacity.max_hosted_clusters
	// DataCapacityUsed is 0–1: the share of its fullest budget (hosted clusters, and vCPU and memory when given).
	DataCapacityUsed      = "capacity_used"
	DataKubernetesVersion = "kubernetes_version" // its kube-apiserver's gitVersion
)

// Observed is what the applier reads back from a HostedCluster.
type Observed struct {
	ReleaseImage string // spec.release.image
	Conditions   map[string]conditions.Reported
	// History is status.version.history, newest first.
	History        []HistoryEntry
	APIEndpoint    string
	Kubeconfig     string
	Deleting       bool
	ClusterIDLabel string
}

// HistoryEntry is one entry of status.version.history.
type HistoryEntry struct {
	State   string // Partial or Completed
	Image   string
	Version string
}

// observe reads what matters of a HostedCluster; nil gives the zero Observed.
func observe(hc *unstructured.Unstructured) Observed {
	var o Observed
	if hc == nil {
		return o
	}
	o.ReleaseImage = nestedString(hc.Object, "spec", "release", "image")
	o.Deleting = hc.GetDeletionTimestamp() != nil
	o.ClusterIDLabel = hc.GetLabels()[LabelClusterID]
	o.Conditions = map[string]conditions.Reported{}
	for _, item := range nestedSlice(hc.Object, "status", "conditions") {
		c, ok := item.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := c["type"].(string)
		status, _ := c["status"].(string)
		reason, _ := c["reason"].(string)
		message, _ := c["message"].(string)
		o.Conditions[typ] = conditions.Reported{Type: typ, Status: conditions.Status(status), Reason: reason, Message: message}
	}
	for _, item := range nestedSlice(hc.Object, "status", "version", "history") {
		h, ok := item.(map[string]any)
		if !ok {
			continue
		}
		state, _ := h["state"].(string)
		image, _ := h["image"].(string)
		version, _ := h["version"].(string)
		o.History = append(o.History, HistoryEntry{State: state, Image: image, Version: version})
	}
	if host := nestedString(hc.Object, "status", "controlPlaneEndpoint", "host"); host != "" {
		port, found, err := unstructured.NestedInt64(hc.Object, "status", "controlPlaneEndpoint", "port")
		if !found || err != nil {
			port = 6443 // HyperShift's default when the endpoint names none
		}
		o.APIEndpoint = net.JoinHostPort(host, strconv.FormatInt(port, 10))
	}
	o.Kubeconfig = nestedString(hc.Object, "status", "kubeconfig", "name")
	return o
}

// nestedString and nestedSlice read a field of a HostedCluster leniently: absent, or of another type than HyperShift
// writes, it reads as empty, since a field HyperShift has not filled in yet is nothing to act on.
func nestedString(obj map[string]any, path ...string) string {
	v, found, err := unstructured.NestedString(obj, path...)
	if !found || err != nil {
		return ""
	}
	return v
}

func nestedSlice(obj map[string]any, path ...string) []any {
	v, found, err := unstructured.NestedSlice(obj, path...)
	if !found || err != nil {
		return nil
	}
	return v
}

// currentVersion is the version of the newest Completed history entry.
func (o *Observed) currentVersion() string {
	for _, h := range o.History {
		if h.State == "Completed" {
			return h.Version
		}
	}
	return ""
}

// Rollout is what to apply: the release image, and when a newer image must wait for the schedule, why.
type Rollout struct {
	Image    string
	Target   string    // the image the rollout gives the cluster
	Waiting  bool      // Target differs from Image because the schedule is closed
	NextOpen time.Time // when Waiting: when the schedule opens next
}

// Plan is what the applier does with a cluster and why: the stream's target, the verdict of its rollout for the
// cluster, and what the UpgradeSchedule lets through of it.
type Plan struct {
	// TargetImage and TargetVersion are the stream's target (the newest release of its minor).
	TargetImage, TargetVersion string
	Verdict                    rollout.Verdict
	Roll                       Rollout
	// Version is the release version of Roll.Image.
	Version string
}

// decideRollout picks the release image to apply: the rollout's image when the cluster is new (a first
// installation is not an upgrade), already runs it, or its schedule is open at now; otherwise the image it runs,
// until NextOpen. A nil schedule is always open.
func decideRollout(running, target string, sched *schedule.Schedule, now time.Time) Rollout {
	if running == "" || running == target {
		return Rollout{Image: target, Target: target}
	}
	state := sched.At(now)
	if state.Open {
		return Rollout{Image: target, Target: target}
	}
	return Rollout{Image: running, Target: target, Waiting: true, NextOpen: state.NextOpen}
}

// outcome computes the report from what was planned and what HyperShift reports. It is pure.
func outcome(ref string, p Plan, o Observed) adapter.Outcome {
	out := adapter.Outcome{Data: map[string]any{
		DataHostedCluster:       ref,
		DataAppliedReleaseImage: p.Roll.Image,
		DataDesiredReleaseImage: p.TargetImage,
		DataTargetVersion:       p.TargetVersion,
		DataHeldReason:          heldReason(p),
	}}
	if v := o.currentVersion(); v != "" {
		out.Data[DataCurrentVersion] = v
	}
	if len(o.History) > 0 {
		out.Data[DataUpgradeState] = o.History[0].State
		out.Data[DataUpgradeVersion] = o.History[0].Version
	}
	if o.APIEndpoint != "" {
		out.Data[DataAPIEndpoint] = o.APIEndpoint
	}
	if o.Kubeconfig != "" {
		out.Data[DataKubeconfigSecret] = o.Kubeconfig
	}
	if available, ok := o.Conditions["Available"]; ok {
		out.Available = conditions.Reported{Status: available.Status, Reason: orReason(available.Reason, ReasonNotReported), Message: available.Message}
	} else {
		out.Available = conditions.Reported{Status: conditions.False, Reason: ReasonWaitingForHostedCluster,
			Message: "applied " + ref + "; HyperShift has not reported on it yet"}
	}
	for _, typ := range []string{ConditionProgressing, ConditionDegraded, ConditionValidReleaseImage} {
		c, ok := o.Conditions[typ]
		if !ok {
			c = conditions.Reported{Type: typ, Status: conditions.Unknown, Reason: ReasonNotReported}
		}
		c.Reason = orReason(c.Reason, ReasonNotReported)
		out.Conditions = append(out.Conditions, c)
	}
	if p.Roll.Waiting {
		out.Data[DataNextUpgradeWindow] = p.Roll.NextOpen.UTC().Format(time.RFC3339)
	}
	out.Conditions = append(out.Conditions, upgradePending(p, o), upgradeBlocked(p, o))
	return out
}

// heldReason is the one word the CLI shows for a cluster that does not move to its stream's target.
func heldReason(p Plan) string {
	switch {
	case p.Verdict.Blocked != "":
		return p.Verdict.Blocked
	case p.Verdict.Held != "":
		return p.Verdict.Held
	case p.Roll.Waiting:
		return ReasonOutsideUpgradeWindow
	}
	return ""
}

// upgradePending says whether a newer release waits, and for what: the schedule's window, or the rollout (its
// stage, its turn, a pause, or a failure of the cluster on that release).
func upgradePending(p Plan, o Observed) conditions.Reported {
	switch {
	case p.Roll.Waiting:
		return conditions.Reported{Type: ConditionUpgradePending, Status: conditions.True, Reason: ReasonOutsideUpgradeWindow,
			Message: fmt.Sprintf("%s waits for the upgrade schedule, which opens next at %s", p.Roll.Target, p.Roll.NextOpen.UTC().Format(time.RFC3339))}
	case p.Verdict.Held != "":
		return conditions.Reported{Type: ConditionUpgradePending, Status: conditions.True, Reason: p.Verdict.Held, Message: p.Verdict.Message}
	case o.ReleaseImage != "" && o.ReleaseImage != p.Roll.Image, len(o.History) > 0 && o.History[0].Image == p.Roll.Image && o.History[0].State != "Completed":
		return conditions.Reported{Type: ConditionUpgradePending, Status: conditions.False, Reason: ReasonRolling,
			Message: "rolling to " + p.Roll.Image}
	}
	return conditions.Reported{Type: ConditionUpgradePending, Status: conditions.False, Reason: ReasonAtReleaseImage,
		Message: "the cluster is at the release image its stream's rollout gives it"}
}

// upgradeBlocked says whether the update graph lets the cluster move towards its stream's target.
func upgradeBlocked(p Plan, o Observed) conditions.Reported {
	if p.Verdict.Blocked != "" {
		return conditions.Reported{Type: ConditionUpgradeBlocked, Status: conditions.True, Reason: p.Verdict.Blocked, Message: p.Verdict.Message}
	}
	if v := o.currentVersion(); v != "" && v == p.TargetVersion {
		return conditions.Reported{Type: ConditionUpgradeBlocked, Status: conditions.False, Reason: ReasonAtTargetRelease,
			Message: "the cluster runs its stream's target, " + v}
	}
	return conditions.Reported{Type: ConditionUpgradeBlocked, Status: conditions.False, Reason: ReasonUpdatePathFound,
		Message: fmt.Sprintf("nothing in the update graph keeps the cluster from its stream's target %s", p.TargetVersion)}
}

// settled reports whether HyperShift reports the cluster available at the applied image with nothing in progress:
// from then on only the schedule, the stream or the spec can give the applier work.
func settled(roll Rollout, o Observed) bool {
	available := o.Conditions["Available"].Status == conditions.True
	progressing := o.Conditions[ConditionProgressing].Status == conditions.True
	return available && !progressing && o.ReleaseImage == roll.Image && len(o.History) > 0 &&
		o.History[0].Image == roll.Image && o.History[0].State == "Completed"
}

func orReason(reason, fallback string) string {
	if reason == "" {
		return fallback
	}
	return reason
}
