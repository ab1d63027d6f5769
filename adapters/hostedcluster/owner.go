package hostedcluster

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

const kindHostedCluster = "HostedCluster"

// memory is what the applier remembers of a cluster between reconciles, in its own report's data.
type memory struct {
	// uid is the HostedCluster's it made or adopted (DataHostedClusterUID).
	uid string
	// ref is the report's DataHostedCluster: reports written before the UID was kept name the HostedCluster there
	// once it was applied, which is evidence enough that there was one.
	ref string
	// token is DataRecreateToken: the last recreate request seen or acted on.
	token string
}

func memoryOf(last *adapter.Report) memory {
	return memory{uid: last.DataString(DataHostedClusterUID), ref: last.DataString(DataHostedCluster), token: last.DataString(DataRecreateToken)}
}

// hadOne reports whether the cluster had a HostedCluster the applier made or adopted.
func (m memory) hadOne() bool { return m.uid != "" || m.ref != "" }

// remember carries what the applier must not forget into out, where this reconcile did not set it.
func remember(out *adapter.Outcome, m memory) {
	for key, value := range map[string]string{DataHostedClusterUID: m.uid, DataRecreateToken: m.token} {
		if value == "" {
			continue
		}
		if out.Data == nil {
			out.Data = map[string]any{}
		}
		if _, set := out.Data[key]; !set {
			out.Data[key] = value
		}
	}
}

// presence is what the applier found of a cluster's HostedCluster, against what it remembers.
type presence int

const (
	presenceInstalled presence = iota // there, and the cluster's
	presenceNew                       // never made: create it
	presenceRecreate                  // made, gone, and a recreate was asked for: create it again
	presenceMissing                   // made and gone, with no request: report, never create
	presenceDeleting                  // being deleted, and not by HyperFleet: report, write nothing
)

// presenceOf decides what to do about a cluster's HostedCluster: live as found (already checked to be the
// cluster's), m as remembered, token the cluster's LabelRecreate. A HostedCluster that went without HyperFleet
// deleting it is not made again on the applier's own initiative: a new one is a new control plane with a new etcd,
// and the old one's nodes would be orphaned. Only a request the applier has not seen before (a LabelRecreate value
// other than the remembered one) brings it back. It is pure.
func presenceOf(live *unstructured.Unstructured, m memory, token string) presence {
	switch {
	case live != nil && live.GetDeletionTimestamp() != nil:
		return presenceDeleting
	case live != nil:
		return presenceInstalled
	case !m.hadOne():
		return presenceNew
	case token != "" && token != m.token:
		return presenceRecreate
	}
	return presenceMissing
}

// missing is the report on a cluster whose HostedCluster went (or is going) without HyperFleet deleting it.
func missing(ref string, p presence, m memory) adapter.Outcome {
	what := ref + " is gone"
	if p == presenceDeleting {
		what = ref + " is being deleted"
	}
	if m.uid != "" {
		what += fmt.Sprintf(" (uid %s)", m.uid)
	}
	msg := what + ", and HyperFleet did not delete it: its nodes may be orphaned. It is not re-created on its own; to " +
		"re-create it (a new control plane with a new etcd), set the cluster's label " + LabelRecreate + " to a new value"
	if m.token != "" {
		msg += fmt.Sprintf(" (not %q)", m.token)
	}
	return adapter.Outcome{
		Available: conditions.Reported{Status: conditions.False, Reason: ReasonHostedClusterMissing, Message: msg},
		Data:      map[string]any{DataHostedCluster: ref},
	}
}

// driftOf returns the fields of desired (what the applier builds, its applied hash equal to live's) whose value
// in live is not what desired says: a hand edit, or another controller's. Fields desired leaves out are not looked
// at (the server's defaults, other managers' fields), nor is the cluster-generation annotation, which the applied
// hash leaves out too. It is pure.
func driftOf(live, desired *unstructured.Unstructured) []string {
	if live == nil {
		return nil
	}
	want := desired.DeepCopy().Object
	annotations := desired.GetAnnotations()
	delete(annotations, AnnotationGeneration)
	meta := map[string]any{"labels": stringMap(desired.GetLabels()), "annotations": stringMap(annotations)}
	want["metadata"] = meta
	delete(want, "apiVersion")
	delete(want, "kind")
	var out []string
	contains(live.Object, want, "", &out)
	return out
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// contains appends to out the paths under path where got does not hold want: every key of a map, every element of
// a list (of the same length), and equal scalars, numbers compared by value.
func contains(got, want any, path string, out *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, orRoot(path))
			return
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			contains(g[k], w[k], path+"."+k, out)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			*out = append(*out, orRoot(path))
			return
		}
		for i := range w {
			contains(g[i], w[i], path+"["+strconv.Itoa(i)+"]", out)
		}
	default:
		if gn, ok := number(got); ok {
			if wn, ok := number(want); ok && gn == wn {
				return
			}
		}
		if !reflect.DeepEqual(got, want) {
			*out = append(*out, orRoot(path))
		}
	}
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func orRoot(path string) string {
	if path == "" {
		return "."
	}
	return path[1:]
}
