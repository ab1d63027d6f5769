// Package kinds builds the server's descriptors of the resource kinds from the kind table (api.Kinds) and adds
// what only the server knows: the rules OpenAPI cannot state, keyed by kind, and the required adapters. main calls
// Build once and hands the result to the store and the router; there is no global registry.
package kinds

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/internal/schedule"
	"github.com/hyperfleet/hyperfleet/internal/schema"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Set is every kind's descriptor, with the ones other packages refer to by name.
type Set struct {
	All             []*resource.Descriptor
	Cluster         *resource.Descriptor
	NodePool        *resource.Descriptor
	VersionStream   *resource.Descriptor
	UpgradeSchedule *resource.Descriptor
	// ManagementCluster is the registry of HyperShift management clusters clusters are placed on.
	ManagementCluster *resource.Descriptor
}

// rules are the per-kind rules that OpenAPI 3.0 cannot state, by kind name; a kind without any has none.
func rules() map[string]func(spec map[string]any) []resource.FieldError {
	return map[string]func(spec map[string]any) []resource.FieldError{
		"Cluster":         clusterRules,
		"NodePool":        nodePoolRules,
		"UpgradeSchedule": upgradeScheduleRules,
		"VersionStream":   versionStreamRules,
	}
}

// Build returns the descriptors of the table's kinds (api.Kinds(), or a test build's), with spec schemas from doc
// and required adapters per kind name (e.g. {"cluster": ["hostedcluster-applier"]}; kind names match kinds and
// plurals case-insensitively). It returns an error naming a malformed table, a schema that doc lacks, or a kind in
// required that does not exist.
func Build(doc *schema.Document, table *api.KindTable, required map[string][]string) (*Set, error) {
	if err := table.Check(); err != nil {
		return nil, err
	}
	byKind := map[*api.Kind]*resource.Descriptor{}
	set := &Set{}
	extra := rules()
	for _, k := range table.All() {
		s, err := doc.Spec(k.SpecSchema)
		if err != nil {
			return nil, err
		}
		var spec resource.SpecSchema = specSchema{s}
		if r, ok := extra[k.Name]; ok {
			spec = withRules{spec, r}
		}
		d := &resource.Descriptor{Kind: k.Name, Plural: k.Plural, Table: k.Plural, NameMin: k.NameMin, NameMax: k.NameMax, Spec: spec,
			Platform: k.Platform, Tenanted: !k.Platform, Transition: transitions()[k.Name], ImmutableHint: immutableHints()[k.Name]}
		if k.Quota != nil {
			d.Quota = &resource.QuotaRule{Name: k.Quota.Name, SpecField: k.Quota.SpecField}
		}
		byKind[k] = d
		set.All = append(set.All, d)
	}
	for k, d := range byKind {
		d.Parent = byKind[k.Parent]
		for _, r := range k.References {
			d.References = append(d.References, resource.Reference{Field: r.Field, Kind: byKind[r.Kind]})
		}
		for _, r := range k.ReportedReferences {
			d.ReportedReferences = append(d.ReportedReferences, resource.ReportedReference{Adapter: r.Adapter, DataKey: r.DataKey, Kind: byKind[r.Kind]})
		}
	}
	set.Cluster, set.NodePool = byKind[table.Cluster], byKind[table.NodePool]
	set.VersionStream, set.UpgradeSchedule = byKind[table.VersionStream], byKind[table.UpgradeSchedule]
	set.ManagementCluster = byKind[table.ManagementCluster]
	for kind, adapters := range required {
		k := table.Lookup(kind)
		if k == nil || byKind[k] == nil {
			return nil, fmt.Errorf("required adapters name kind %q, which does not exist", kind)
		}
		byKind[k].RequiredAdapters = adapters
	}
	for _, d := range set.All {
		if err := d.Check(); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// specSchema adapts a schema.Spec to the domain's SpecSchema.
type specSchema struct{ s *schema.Spec }

func (a specSchema) Validate(spec map[string]any) []resource.FieldError {
	violations := a.s.Validate(spec)
	out := make([]resource.FieldError, len(violations))
	for i, v := range violations {
		out[i] = resource.FieldError{Field: v.Field, Message: v.Message}
	}
	return out
}

func (a specSchema) ApplyDefaults(spec map[string]any) error { return a.s.ApplyDefaults(spec) }

func (a specSchema) InternalFields(spec map[string]any) []string { return a.s.InternalFields(spec) }

func (a specSchema) ImmutableFields() []string { return a.s.ImmutableFields() }

func (a specSchema) HasInternal() bool { return a.s.HasInternal() }

func (a specSchema) StripInternal(spec map[string]any) bool { return a.s.StripInternal(spec) }

func (a specSchema) InternalPaths() ([][]string, bool) { return a.s.InternalPaths() }

func (a specSchema) IsInternal(path []string) bool { return a.s.IsInternal(path) }

// withRules adds rules that OpenAPI 3.0 cannot state (property names, relations between fields) to a kind's schema.
type withRules struct {
	resource.SpecSchema
	rules func(spec map[string]any) []resource.FieldError
}

func (w withRules) Validate(spec map[string]any) []resource.FieldError {
	problems := w.SpecSchema.Validate(spec)
	if len(problems) > 0 {
		return problems // the rules may assume a spec of the schema's shape
	}
	return w.rules(spec)
}

// labelKey is the rule for a selector key: it becomes part of a `caphvlabel:<key>=<value>` device tag.
var labelKey = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$`)

// nodePoolRules checks the Hivelocity selector's keys, and that max_unavailable and max_surge are not both zero
// (a pool could then never re-provision a device; OpenAPI cannot relate two fields).
func nodePoolRules(spec map[string]any) []resource.FieldError {
	zero := func(v any) bool { return v == float64(0) || v == "0%" }
	var problems []resource.FieldError
	if zero(spec["max_unavailable"]) && zero(spec["max_surge"]) {
		problems = append(problems, resource.FieldError{Field: "max_unavailable",
			Message: "max_unavailable and max_surge cannot both be 0: no device could ever be re-provisioned"})
	}
	platform, _ := spec["platform"].(map[string]any)
	hivelocity, _ := platform["hivelocity"].(map[string]any)
	selector, _ := hivelocity["selector"].(map[string]any)
	for _, key := range slices.Sorted(maps.Keys(selector)) {
		if !labelKey.MatchString(key) {
			problems = append(problems, resource.FieldError{Field: "platform.hivelocity.selector." + key,
				Message: "a selector key is 1 to 63 letters, digits, '-', '_' and '.', starting with a letter or digit"})
		}
	}
	return problems
}

// requiredServices are the control-plane services HyperShift publishes for every platform HyperFleet offers.
var requiredServices = []string{"APIServer", "OAuthServer", "Konnectivity", "Ignition"}

// clusterRules checks what HyperShift's HostedCluster validation would refuse and OpenAPI 3.0 cannot state: an
// Agent platform names its agent namespace, each service is published once, the four HyperShift needs are there,
// and a publishing strategy carries the settings of its type only.
func clusterRules(spec map[string]any) []resource.FieldError {
	hc, _ := spec["hosted_cluster"].(map[string]any)
	var problems []resource.FieldError
	add := func(field, msg string) {
		problems = append(problems, resource.FieldError{Field: "hosted_cluster." + field, Message: msg})
	}
	platform, _ := hc["platform"].(map[string]any)
	if platform["type"] == "Agent" && platform["agent"] == nil {
		add("platform.agent", "is required with platform type Agent: it names the namespace of the agents")
	}
	services, _ := hc["services"].([]any)
	seen := map[string]bool{}
	for i, item := range services {
		svc, _ := item.(map[string]any)
		name, _ := svc["service"].(string)
		field := fmt.Sprintf("services[%d]", i)
		if seen[name] {
			add(field+".service", name+" is published more than once")
		}
		seen[name] = true
		switch svc["type"] {
		case "NodePort":
			if svc["address"] == nil {
				add(field+".address", "is required with type NodePort")
			}
			if svc["hostname"] != nil {
				add(field+".hostname", "goes with Route or LoadBalancer, not NodePort")
			}
		default:
			if svc["address"] != nil || svc["port"] != nil {
				add(field, "address and port go with type NodePort only")
			}
		}
	}
	if services != nil {
		for _, name := range requiredServices {
			if !seen[name] {
				add("services", "must publish "+name)
			}
		}
	}
	return problems
}

// upgradeScheduleRules checks what the schema cannot: the time zone exists, durations are at most a week, and
// blackouts end after they start. The rules are the ones the applier evaluates the schedule with (package
// schedule), so a schedule the API stores is one the applier can read.
func upgradeScheduleRules(spec map[string]any) []resource.FieldError {
	var in struct {
		Timezone string `json:"timezone"`
		Windows  []struct {
			Days     []string `json:"days"`
			Start    string   `json:"start"`
			Duration string   `json:"duration"`
		} `json:"windows"`
		Blackouts []schedule.Blackout `json:"blackouts"`
	}
	raw, err := json.Marshal(spec)
	if err == nil {
		err = json.Unmarshal(raw, &in)
	}
	if err != nil {
		return []resource.FieldError{{Field: "", Message: "cannot be read as an upgrade schedule: " + err.Error()}}
	}
	windows := make([]schedule.WindowSpec, len(in.Windows))
	for i, w := range in.Windows {
		windows[i] = schedule.WindowSpec{Days: w.Days, Start: w.Start, Duration: w.Duration}
	}
	_, err = schedule.Parse(in.Timezone, windows, in.Blackouts)
	var fe *schedule.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return []resource.FieldError{{Field: fe.Field, Message: fe.Message}}
	default:
		return []resource.FieldError{{Field: "", Message: err.Error()}}
	}
}
