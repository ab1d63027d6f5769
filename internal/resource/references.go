package resource

import (
	"encoding/json"
	"fmt"
	"strings"
)

// referrer is a kind whose spec field names resources of another kind.
type referrer struct {
	kind  *Descriptor
	field string
}

// reportReferrer is a kind about which an adapter reports, under a data key, the name of a resource of another kind.
type reportReferrer struct {
	kind         *Descriptor
	adapter, key string
}

// namedRefs returns the references spec makes, skipping fields that are absent or empty. The schema has already
// made every reference field a string.
func namedRefs(d *Descriptor, spec map[string]any) []NamedRef {
	var out []NamedRef
	for _, ref := range d.References {
		if name, _ := spec[ref.Field].(string); name != "" {
			out = append(out, NamedRef{Reference: ref, Name: name})
		}
	}
	return out
}

// changedRefs returns the references of after whose names differ from before's: only a new name needs checking,
// so a cluster whose stream is being deleted can still change its other fields.
func changedRefs(d *Descriptor, before, after map[string]any) []NamedRef {
	var out []NamedRef
	for _, ref := range namedRefs(d, after) {
		if old, _ := before[ref.Field].(string); old != ref.Name {
			out = append(out, ref)
		}
	}
	return out
}

// MissingReference is the error for a reference to a name no live resource of its kind has.
func MissingReference(ref NamedRef) error {
	msg := fmt.Sprintf("no live %s is named %q", ref.Kind.Kind, ref.Name)
	return &Error{Code: CodeUnprocessable, Message: "spec." + ref.Field + ": " + msg,
		Fields: []FieldError{{Field: "spec." + ref.Field, Message: msg}}}
}

// referrersShown is how many referring resources an in-use error names.
const referrersShown = 3

// checkNotReferenced refuses to delete r while live resources name it.
func (s *Service) checkNotReferenced(tx Tx, d *Descriptor, r *Resource) error {
	for _, ref := range s.referrers[d] {
		names, err := tx.Referrers(ref.kind, ref.field, r.Name, referrersShown+1)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			continue
		}
		list := strings.Join(names[:min(len(names), referrersShown)], ", ")
		if len(names) > referrersShown {
			list += " and more"
		}
		return Errorf(CodeInUse, "%s %q is named in spec.%s of live %ss (%s): point them elsewhere or delete them first",
			d.Kind, r.Name, ref.field, ref.kind.Kind, list)
	}
	for _, ref := range s.reportReferrers[d] {
		names, count, err := tx.ReportReferrers(ref.kind, ref.adapter, ref.key, r.Name, referrersShown)
		if err != nil {
			return err
		}
		if count == 0 {
			continue
		}
		list := strings.Join(names, ", ")
		if count > len(names) {
			list += fmt.Sprintf(" and %d more", count-len(names))
		}
		return Errorf(CodeInUse, "%s %q still has %d %s(s) on it, as %s reports in data.%s (%s): delete them or re-create them elsewhere first",
			d.Kind, r.Name, count, ref.kind.Kind, ref.adapter, ref.key, list)
	}
	return nil
}

// checkReportedRefs refuses a report that names, under a reported reference's key, a new name no live resource
// has, and locks the named row against deletion until the report commits. A name the stored report already held
// is not checked again, so that an adapter can go on reporting about (and finalizing) a resource whose named one
// an admin force-deleted.
func checkReportedRefs(tx Tx, d *Descriptor, adapter string, data, stored json.RawMessage) error {
	for _, ref := range d.ReportedReferences {
		if ref.Adapter != adapter {
			continue
		}
		name, old := dataString(data, ref.DataKey), dataString(stored, ref.DataKey)
		if name == "" || name == old {
			continue
		}
		ok, err := tx.Referenced(ref.Kind, name)
		if err != nil {
			return err
		}
		if !ok {
			msg := fmt.Sprintf("no live %s is named %q", ref.Kind.Kind, name)
			return &Error{Code: CodeUnprocessable, Message: "data." + ref.DataKey + ": " + msg,
				Fields: []FieldError{{Field: "data." + ref.DataKey, Message: msg}}}
		}
	}
	return nil
}

// dataString returns the string at key of a report's data object, or "".
func dataString(data json.RawMessage, key string) string {
	if len(data) == 0 {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	var v string
	if json.Unmarshal(m[key], &v) != nil {
		return ""
	}
	return v
}
