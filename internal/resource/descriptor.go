package resource

import (
	"fmt"
	"regexp"
)

// SpecSchema validates and defaults a kind's spec. It is built from openapi/openapi.yaml (see package schema).
type SpecSchema interface {
	// Validate returns every rule the spec breaks; none means valid.
	Validate(spec map[string]any) []FieldError
	// ApplyDefaults fills schema defaults for absent properties, in place.
	ApplyDefaults(spec map[string]any) error
	// InternalFields returns the dotted paths of internal (admin-only) fields present in spec, null or not.
	InternalFields(spec map[string]any) []string
	// ImmutableFields returns the dotted paths of the fields that may not change once the resource exists.
	ImmutableFields() []string
	// HasInternal reports whether the schema has internal fields at all.
	HasInternal() bool
	// StripInternal removes the internal fields from spec, in place, and reports whether there were any.
	StripInternal(spec map[string]any) bool
	// InternalPaths returns the internal fields' paths when fixed paths reach them all (ok), so that a store can
	// leave them out as it reads.
	InternalPaths() (paths [][]string, ok bool)
	// IsInternal reports whether the field at path (property names from the top), or one enclosing it, is
	// internal: a caller who may not see internal fields may not search on it either.
	IsInternal(path []string) bool
}

// Descriptor describes one kind of resource. The engine serves every kind from its descriptor, so adding a kind
// is a descriptor (built in main), a schema in openapi.yaml and a migration.
type Descriptor struct {
	Kind    string      // "Cluster"
	Plural  string      // URL segment, "clusters"
	Table   string      // SQL table, "clusters"
	Parent  *Descriptor // nil for a root kind
	NameMin int
	NameMax int
	Spec    SpecSchema
	// RequiredAdapters must all report before the resource is Ready (and finalize before it is removed).
	RequiredAdapters []string
	// References are spec fields that name a live resource of another kind (a cluster's version_stream).
	References []Reference
	// ReportedReferences are keys of an adapter's report data that name a live resource of another kind (the
	// cluster-placer's data.management_cluster on a cluster).
	ReportedReferences []ReportedReference
	// Platform marks a kind that many resources share by reference (VersionStream, UpgradeSchedule): the HTTP edge
	// lets only platform operators and admins write it.
	Platform bool
	// Transition, when set, checks a spec change against the stored spec (both defaulted) beyond what the schema
	// and immutability say, e.g. a VersionStream's minor moving forward one at a time. It returns the refusal, nil
	// when the change is allowed. A forced update (Patch.Force, admins only) skips it.
	Transition func(before, after map[string]any) error
	// Tenanted marks a kind whose resources belong to a tenant (clusters, node pools): a caller confined to a
	// tenant sees only its own. A child kind's resources belong to their parent's tenant. Other kinds are global.
	Tenanted bool
	// Quota, when set, is what one resource of this kind counts against its tenant's quota of that name.
	Quota *QuotaRule
	// ImmutableHint, when set, tells a caller whose change of an immutable field was refused what to do instead
	// (e.g. create a new node pool); it ends the refusal's message.
	ImmutableHint string
}

// Reference is a top-level spec field whose string value is the name of a live resource of a root kind. Creating
// or changing it to a name no live resource has is refused, and a resource that live resources name cannot be
// deleted; both checks lock the named row, so a concurrent delete and create cannot both succeed.
type Reference struct {
	Field string      // "version_stream"
	Kind  *Descriptor // VersionStream
}

// ReportedReference is a key of Adapter's report data whose string value names a live resource of a root kind. A
// report that sets it to a new name no live resource has is refused, and a resource that such reports name cannot
// be deleted; both checks lock the named row, as spec references do, so a report racing a delete has one winner.
type ReportedReference struct {
	Adapter string      // "cluster-placer"
	DataKey string      // "management_cluster"
	Kind    *Descriptor // ManagementCluster
}

// QuotaRule is how resources of a kind use a tenant's quota: each live one counts 1, or the integer value of its
// top-level spec field SpecField when that is set (a node pool's replicas: its devices).
type QuotaRule struct {
	Name      string // "clusters", "nodepool_devices"
	SpecField string
}

// Amount is what a resource with spec (defaulted) counts against the quota.
func (q *QuotaRule) Amount(spec map[string]any) int64 {
	if q.SpecField == "" {
		return 1
	}
	if n, ok := spec[q.SpecField].(float64); ok && n > 0 {
		return int64(n)
	}
	return 0
}

// NamedRef is one reference of one resource: the field and the name it holds.
type NamedRef struct {
	Reference
	Name string
}

var (
	identifier  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	adapterName = regexp.MustCompile(`^[a-z][-a-z0-9_.]*$`)
)

// Check reports a descriptor that main built wrong; it is called once at start-up.
func (d *Descriptor) Check() error {
	switch {
	case d.Kind == "" || d.Plural == "":
		return fmt.Errorf("descriptor %q: kind and plural are required", d.Kind)
	case !identifier.MatchString(d.Table):
		return fmt.Errorf("descriptor %s: table %q is not a plain SQL identifier", d.Kind, d.Table)
	case d.NameMin < 1 || d.NameMax < d.NameMin || d.NameMax > 63:
		return fmt.Errorf("descriptor %s: name length %d–%d is outside 1–63", d.Kind, d.NameMin, d.NameMax)
	case d.Spec == nil:
		return fmt.Errorf("descriptor %s: no spec schema", d.Kind)
	}
	for _, ref := range d.References {
		if ref.Kind == nil || ref.Kind.Parent != nil || !identifier.MatchString(ref.Field) {
			return fmt.Errorf("descriptor %s: reference %q must be a plain field naming a root kind", d.Kind, ref.Field)
		}
	}
	for _, ref := range d.ReportedReferences {
		// The adapter and key become part of a query's text (to match a partial expression index), so they must be
		// plain words.
		if ref.Kind == nil || ref.Kind.Parent != nil || !adapterName.MatchString(ref.Adapter) || !identifier.MatchString(ref.DataKey) {
			return fmt.Errorf("descriptor %s: reported reference %s/%q must be a plain data key naming a root kind", d.Kind, ref.Adapter, ref.DataKey)
		}
	}
	if d.Quota != nil && (!identifier.MatchString(d.Quota.Name) || (d.Quota.SpecField != "" && !identifier.MatchString(d.Quota.SpecField))) {
		return fmt.Errorf("descriptor %s: quota %q must name a plain field", d.Kind, d.Quota.Name)
	}
	if d.Parent != nil && d.Parent.Tenanted != d.Tenanted {
		return fmt.Errorf("descriptor %s: a child kind belongs to its parent's tenant, so it is tenanted exactly when %s is", d.Kind, d.Parent.Kind)
	}
	return nil
}

// Path returns the URL path of a resource of this kind below the API base, e.g. "/clusters/<id>/nodepools/<id>".
func (d *Descriptor) Path(parentID, id string) string {
	if d.Parent == nil {
		return "/" + d.Plural + "/" + id
	}
	return d.Parent.Path("", parentID) + "/" + d.Plural + "/" + id
}
