package resource

import (
	"fmt"
	"strings"
)

// referrer is a kind whose spec field names resources of another kind.
type referrer struct {
	kind  *Descriptor
	field string
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
	return nil
}
