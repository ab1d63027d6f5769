package hypershiftsim

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HostedCluster condition types the simulator reports, as HyperShift names them.
const (
	ConditionAvailable         = "Available"
	ConditionProgressing       = "Progressing"
	ConditionDegraded          = "Degraded"
	ConditionValidReleaseImage = "ValidReleaseImage"
)

// Condition reasons the simulator reports, as HyperShift spells them (api/hypershift/v1beta1 and the
// hostedcluster controller).
const (
	ReasonAsExpected          = "AsExpected"
	ReasonWaitingForAvailable = "WaitingForAvailable"
	ReasonProgressing         = "Progressing"
)

// Version history states, as in OpenShift's ClusterVersion (configv1.UpdateState).
const (
	StatePartial   = "Partial"
	StateCompleted = "Completed"
)

// Condition messages, taken from what HyperShift writes so that readers matching on them see the real text.
const (
	msgAvailable        = "The hosted control plane is available"
	msgNotAvailable     = "Waiting for hosted control plane to be healthy"
	msgProgressing      = "HostedCluster is deploying, upgrading, or reconfiguring"
	msgAtVersion        = "HostedCluster is at expected version"
	msgNotDegraded      = "The hosted cluster is not degraded"
	msgValidReleaseInfo = "Release image is valid"
)

// maxHistory bounds status.version.history, as the cluster-version operator does, so that a long-lived object
// upgraded many times does not grow without end.
const maxHistory = 100

// defaultBaseDomain names the API endpoint of a HostedCluster that has no spec.dns.baseDomain and publishes its
// API server without a hostname of its own.
const defaultBaseDomain = "hypershift.local"

// hostedCluster is the part of a HostedCluster the simulator reads.
type hostedCluster struct {
	Namespace, Name string
	Generation      int64
	Spec            hostedClusterSpec
	// VersionHint is the version a client declared for the release image (ReleaseVersionAnnotation).
	VersionHint string
}

// ReleaseVersionAnnotation is read as the release image's version when the image is pinned by digest: real HyperShift
// reads the version from the release payload, which the simulator cannot pull, and HyperFleet's applier declares
// the version it resolved under this annotation.
const ReleaseVersionAnnotation = "hyperfleet.io/release-version"

type hostedClusterSpec struct {
	Release  release   `json:"release"`
	DNS      dnsSpec   `json:"dns"`
	Services []service `json:"services"`
}

type dnsSpec struct {
	BaseDomain string `json:"baseDomain"`
}

type service struct {
	Service  string `json:"service"`
	Strategy struct {
		Type     string `json:"type"`
		NodePort *struct {
			Address string `json:"address"`
			Port    int32  `json:"port"`
		} `json:"nodePort"`
		LoadBalancer *hostname `json:"loadBalancer"`
		Route        *hostname `json:"route"`
	} `json:"servicePublishingStrategy"`
}

type hostname struct {
	Hostname string `json:"hostname"`
}

// status is the part of a HostedCluster's status the simulator writes. Its JSON matches the CRD: every field the
// CRD requires is always written (completionTime and availableUpdates as null where HyperShift leaves them so).
type status struct {
	Conditions           []metav1.Condition    `json:"conditions,omitempty"`
	Version              *versionStatus        `json:"version,omitempty"`
	ControlPlaneEndpoint *apiEndpoint          `json:"controlPlaneEndpoint,omitempty"`
	KubeConfig           *localObjectReference `json:"kubeconfig,omitempty"`
	KubeadminPassword    *localObjectReference `json:"kubeadminPassword,omitempty"`
}

type versionStatus struct {
	Desired            release        `json:"desired"`
	History            []updateRecord `json:"history,omitempty"`
	ObservedGeneration int64          `json:"observedGeneration"`
	AvailableUpdates   []release      `json:"availableUpdates"`
}

type release struct {
	Image   string `json:"image"`
	Version string `json:"version,omitempty"`
}

// updateRecord is one entry of status.version.history, newest first.
type updateRecord struct {
	State          string       `json:"state"`
	StartedTime    metav1.Time  `json:"startedTime"`
	CompletionTime *metav1.Time `json:"completionTime"`
	Version        string       `json:"version,omitempty"`
	Image          string       `json:"image"`
	Verified       bool         `json:"verified"`
}

type apiEndpoint struct {
	Host string `json:"host"`
	Port int32  `json:"port"`
}

type localObjectReference struct {
	Name string `json:"name"`
}

func (s status) clone() status {
	c := s
	c.Conditions = slices.Clone(s.Conditions)
	if s.Version != nil {
		v := *s.Version
		v.History = slices.Clone(s.Version.History)
		c.Version = &v
	}
	return c
}

// step is what nextStatus decided.
type step struct {
	status status
	// wait is true while the newest rollout is Partial; after is how long until it is due to complete.
	wait  bool
	after time.Duration
	// started and completed are the history entries that this step added or completed, for the log.
	started, completed *updateRecord
	// failed is how the newest rollout fails, "" if it does not (or is not due yet).
	failed FailMode
}

// nextStatus returns the status HyperShift would report for hc at now, given the status it reported last (cur),
// how long a rollout takes (delay) and the version to report for images whose tag names none (fallback).
//
// A release image not at the top of the history starts a rollout: a Partial entry goes on top and Progressing
// turns True. The entry turns Completed at its startedTime plus delay, and never in the step that added it, so
// that every rollout is written (and can be seen) as Partial first, even with a zero delay. The cluster is
// Available from its first completed rollout on, upgrades included, and only then gets its API endpoint,
// kubeconfig and kubeadmin-password references. Timestamps are kept to the second when written, so a rollout
// may complete up to a second earlier than delay after it started.
//
// failing says how the rollout of a version fails (see Failures), "" when it does not; nil fails nothing. A
// failing rollout stays Partial when it is due, with Degraded True for FailDegraded, and is looked at again after
// delay (at least a second), so that clearing the failure lets it complete.
func nextStatus(cur status, hc hostedCluster, now time.Time, delay time.Duration, fallback string, failing func(version string) FailMode) step {
	next := cur.clone()
	if next.Version == nil {
		next.Version = &versionStatus{}
	}
	v := next.Version
	image := hc.Spec.Release.Image
	version := versionOf(image, fallback)
	if version == fallback && hc.VersionHint != "" {
		version = hc.VersionHint
	}
	var st step

	switch {
	case len(v.History) == 0 || v.History[0].Image != image:
		entry := updateRecord{State: StatePartial, StartedTime: metav1.NewTime(now), Version: version, Image: image}
		v.History = append([]updateRecord{entry}, v.History...)
		if len(v.History) > maxHistory {
			v.History = v.History[:maxHistory]
		}
		st.started = &entry
		st.wait, st.after = true, delay
	case v.History[0].State != StateCompleted:
		top := &v.History[0]
		due := top.StartedTime.Add(delay)
		if now.Before(due) {
			st.wait, st.after = true, due.Sub(now)
			break
		}
		if failing != nil {
			if st.failed = failing(top.Version); st.failed != "" {
				st.wait, st.after = true, max(delay, time.Second)
				break
			}
		}
		top.State = StateCompleted
		top.CompletionTime = &metav1.Time{Time: now}
		if top.Version == "" {
			top.Version = version
		}
		completed := *top
		st.completed = &completed
	}
	v.Desired = release{Image: image, Version: version}
	v.ObservedGeneration = hc.Generation

	available := slices.ContainsFunc(v.History, func(r updateRecord) bool { return r.State == StateCompleted })
	if available {
		ep := endpointOf(hc)
		next.ControlPlaneEndpoint = &ep
		next.KubeConfig = &localObjectReference{Name: KubeconfigSecretName(hc.Name)}
		next.KubeadminPassword = &localObjectReference{Name: KubeadminPasswordSecretName(hc.Name)}
	}

	set := func(typ string, ok bool, reason, message string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&next.Conditions, metav1.Condition{
			Type: typ, Status: s, Reason: reason, Message: message,
			ObservedGeneration: hc.Generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
	if available {
		set(ConditionAvailable, true, ReasonAsExpected, msgAvailable)
	} else {
		set(ConditionAvailable, false, ReasonWaitingForAvailable, msgNotAvailable)
	}
	if v.History[0].State == StatePartial {
		set(ConditionProgressing, true, ReasonProgressing, msgProgressing)
	} else {
		set(ConditionProgressing, false, ReasonAsExpected, msgAtVersion)
	}
	if st.failed == FailDegraded {
		set(ConditionDegraded, true, ReasonReleaseFailed, msgReleaseFailed)
	} else {
		set(ConditionDegraded, false, ReasonAsExpected, msgNotDegraded)
	}
	set(ConditionValidReleaseImage, true, ReasonAsExpected, msgValidReleaseInfo)

	st.status = next
	return st
}

// endpointOf returns where the hosted API server would be reached: the address HyperShift publishes it on, taken
// from the APIServer service's publishing strategy (a NodePort address and port, a LoadBalancer or Route
// hostname), else api.<name>.<baseDomain>. The port is 443 for a Route and 6443 otherwise, as with HyperShift.
func endpointOf(hc hostedCluster) apiEndpoint {
	domain := hc.Spec.DNS.BaseDomain
	if domain == "" {
		domain = defaultBaseDomain
	}
	ep := apiEndpoint{Host: "api." + hc.Name + "." + domain, Port: 6443}
	i := slices.IndexFunc(hc.Spec.Services, func(s service) bool { return s.Service == "APIServer" })
	if i < 0 {
		return ep
	}
	s := hc.Spec.Services[i].Strategy
	switch {
	case s.Type == "NodePort" && s.NodePort != nil:
		ep.Host = s.NodePort.Address
		if s.NodePort.Port > 0 {
			ep.Port = s.NodePort.Port
		}
	case s.Type == "LoadBalancer" && s.LoadBalancer != nil && s.LoadBalancer.Hostname != "":
		ep.Host = s.LoadBalancer.Hostname
	case s.Type == "Route":
		ep.Port = 443
		if s.Route != nil && s.Route.Hostname != "" {
			ep.Host = s.Route.Hostname
		}
	}
	return ep
}

// releaseTag matches the tags of OpenShift release images: a version, optionally followed by the architecture,
// e.g. 4.16.3-x86_64, 4.17.0-rc.2-aarch64, 4.18.0-0.nightly-2025-01-02-123456.
var releaseTag = regexp.MustCompile(`^(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$`)

// archSuffixes are the architecture suffixes of release image tags.
func archSuffixes() []string {
	return []string{"-x86_64", "-aarch64", "-ppc64le", "-s390x", "-multi", "-amd64", "-arm64"}
}

// versionOf returns the OpenShift version in the tag of a release image, such as 4.16.3 for
// quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64, or fallback when the image is pinned by digest or its
// tag is not a version (real HyperShift reads the version from the release payload, which the simulator cannot).
func versionOf(image, fallback string) string {
	if strings.Contains(image, "@") {
		return fallback
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return fallback
	}
	tag := image[i+1:]
	for _, arch := range archSuffixes() {
		if t, ok := strings.CutSuffix(tag, arch); ok {
			tag = t
			break
		}
	}
	if !releaseTag.MatchString(tag) {
		return fallback
	}
	return tag
}

// KubeconfigSecretName returns the name of the Secret, in the HostedCluster's namespace, that holds the admin
// kubeconfig of HostedCluster name, as HyperShift names it; status.kubeconfig points at it.
func KubeconfigSecretName(name string) string { return name + "-admin-kubeconfig" }

// KubeadminPasswordSecretName returns the name of the Secret, in the HostedCluster's namespace, that holds the
// kubeadmin password of HostedCluster name, as HyperShift names it; status.kubeadminPassword points at it.
func KubeadminPasswordSecretName(name string) string { return name + "-kubeadmin-password" }
