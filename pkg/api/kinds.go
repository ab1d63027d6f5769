package api

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// Kind describes one resource kind once, for every program that serves or drives the API: the server builds its
// descriptor from it (adding the rules OpenAPI cannot state), the CLI names, finds and prints resources with it,
// the adapter runtime and the generic client address them with it, and the seed and load tools create them.
//
// Adding a kind is a Kind in Kinds, its schemas in openapi.yaml and a migration from the table template; nothing
// else. Kinds are compared by Plural, which is unique in a table.
type Kind struct {
	Name     string // "Cluster": the API's kind, as resources, events and reports spell it
	Singular string // "cluster": the CLI's word, as in "cluster/demo"
	Plural   string // "clusters": the URL segment and the SQL table
	Short    string // "cl": the CLI's short name
	// Parent is the kind a resource of this kind belongs to (NodePool → Cluster); nil for a root kind. Children
	// are served under their parent (/clusters/{id}/nodepools) and, read-only, across parents (/nodepools).
	Parent *Kind
	// NameMin and NameMax bound a resource name's length; names are DNS labels. <Name>Create in openapi.yaml
	// states the same bounds (TestKindsAgreeWithTheDocument).
	NameMin, NameMax int
	// SpecSchema is the name of the spec's schema in openapi.yaml's components ("ClusterSpec").
	SpecSchema string
	// References are the spec fields that name a live resource of another kind.
	References []Reference
	// ReportedReferences are names of resources of another kind that an adapter reports in its data about a
	// resource of this kind (the cluster-placer's data.management_cluster): a resource so named cannot be deleted
	// while such reports exist.
	ReportedReferences []ReportedReference
	// Platform marks a kind whose resources every cluster shares (a cluster names them), so that changing one
	// changes many clusters: only roles platform and admin write them; everyone who reads may read them.
	Platform bool
	// Columns are the kind's own columns in the CLI's tables, between NAME and PHASE.
	Columns []Column
	// Quota, when set, is the tenant quota each live resource of this kind uses (GET /tenants/{tenant}).
	Quota *Quota
}

// Quota is how resources of a kind count against a tenant's quota: 1 each, or the integer value of a top-level
// spec field (a node pool's replicas count against nodepool_devices).
type Quota struct {
	Name      string // "clusters"
	SpecField string // "" for 1 each
}

// Reference is a top-level spec field whose string value names a live resource of a root kind (a cluster's
// version_stream names a VersionStream).
type Reference struct {
	Field string
	Kind  *Kind
}

// ReportedReference is a key of an adapter's report data whose string value names a resource of a root kind (the
// cluster-placer reports the ManagementCluster a cluster is placed on as data.management_cluster).
type ReportedReference struct {
	Adapter, DataKey string
	Kind             *Kind
}

// Column is a column of the CLI's table of a kind, as a CRD's additionalPrinterColumns: a header and a JSONPath
// template (kubectl's syntax, e.g. "{.spec.replicas}") evaluated against the resource as the API returns it.
type Column struct {
	Header   string
	JSONPath string
	// Wide columns show with -o wide only.
	Wide bool
}

// KindTable is every kind a program knows, with the ones other code names directly.
type KindTable struct {
	Cluster, NodePool, VersionStream, UpgradeSchedule, ManagementCluster *Kind
	all                                                                  []*Kind
}

// Kinds returns the kinds the API serves, in the order help and listings show them. Each call builds a new table,
// so that no caller can change another's.
func Kinds() *KindTable {
	versionStream := &Kind{
		Name: "VersionStream", Singular: "versionstream", Plural: "versionstreams", Short: "vs",
		NameMin: 1, NameMax: 63, SpecSchema: "VersionStreamSpec", Platform: true,
		Columns: []Column{
			{Header: "TARGET", JSONPath: "{.spec.target_version}"},
			{Header: "CHANNEL", JSONPath: "{.spec.channel_group}-{.spec.target_version}"},
			// The resolved version itself is in the resolver's report, a request per stream away; the stream's
			// Available condition says whether a release image is known, which is what a cluster needs.
			{Header: "RESOLVED", JSONPath: `{.status.conditions[?(@.type=="Available")].status}`},
		},
	}
	upgradeSchedule := &Kind{
		Name: "UpgradeSchedule", Singular: "upgradeschedule", Plural: "upgradeschedules", Short: "us",
		NameMin: 1, NameMax: 63, SpecSchema: "UpgradeScheduleSpec", Platform: true,
		Columns: []Column{
			{Header: "TIMEZONE", JSONPath: "{.spec.timezone}"},
			{Header: "WINDOWS", JSONPath: "{range .spec.windows[*]}{.start}+{.duration} {end}"},
			{Header: "DAYS", JSONPath: "{range .spec.windows[*]}{.days} {end}", Wide: true},
		},
	}
	managementCluster := &Kind{
		Name: "ManagementCluster", Singular: "managementcluster", Plural: "managementclusters", Short: "mc",
		NameMin: 1, NameMax: 63, SpecSchema: "ManagementClusterSpec", Platform: true,
		Columns: []Column{
			{Header: "REGION", JSONPath: "{.spec.region}"},
			{Header: "SCHEDULABLE", JSONPath: "{.spec.schedulable}"},
			// The applier's Available message is "<hosted>/<max> hosted clusters" (or why it cannot serve it).
			{Header: "CAPACITY", JSONPath: `{.status.conditions[?(@.type=="HostedclusterApplierAvailable")].message}`},
			{Header: "CREDENTIALS", JSONPath: "{.spec.credentials.kubeconfig}", Wide: true},
		},
	}
	cluster := &Kind{
		Name: "Cluster", Singular: "cluster", Plural: "clusters", Short: "cl",
		NameMin: 3, NameMax: 53, SpecSchema: "ClusterSpec", Quota: &Quota{Name: "clusters"},
		References:         []Reference{{Field: "version_stream", Kind: versionStream}, {Field: "upgrade_schedule", Kind: upgradeSchedule}},
		ReportedReferences: []ReportedReference{{Adapter: "cluster-placer", DataKey: "management_cluster", Kind: managementCluster}},
		Columns: []Column{
			{Header: "VERSION STREAM", JSONPath: "{.spec.version_stream}"},
			{Header: "SCHEDULE", JSONPath: "{.spec.upgrade_schedule}", Wide: true},
			{Header: "PAUSED", JSONPath: "{.spec.paused}", Wide: true},
			// The placer's Available message names the management cluster once placed (or why it cannot be).
			{Header: "MANAGEMENT CLUSTER", JSONPath: `{.status.conditions[?(@.type=="ClusterPlacerAvailable")].message}`, Wide: true},
			// Admins see every tenant's clusters; everyone else only their own.
			{Header: "TENANT", JSONPath: "{.tenant}", Wide: true},
		},
	}
	nodePool := &Kind{
		Name: "NodePool", Singular: "nodepool", Plural: "nodepools", Short: "np", Parent: cluster,
		NameMin: 3, NameMax: 15, SpecSchema: "NodePoolSpec", Quota: &Quota{Name: "nodepool_devices", SpecField: "replicas"},
		Columns: []Column{
			{Header: "REPLICAS", JSONPath: "{.spec.replicas}"},
			{Header: "DEVICE TYPE", JSONPath: "{.spec.platform.hivelocity.device_type}", Wide: true},
			{Header: "REGION", JSONPath: "{.spec.platform.hivelocity.region}", Wide: true},
			{Header: "PAUSED", JSONPath: "{.spec.paused}", Wide: true},
			{Header: "TENANT", JSONPath: "{.tenant}", Wide: true},
		},
	}
	return &KindTable{Cluster: cluster, NodePool: nodePool, VersionStream: versionStream, UpgradeSchedule: upgradeSchedule,
		ManagementCluster: managementCluster, all: []*Kind{cluster, nodePool, versionStream, upgradeSchedule, managementCluster}}
}

// With returns a table of t's kinds and more, for a build that serves kinds of its own (the throwaway-kind test).
// Check it before use.
func (t *KindTable) With(more ...*Kind) *KindTable {
	out := *t
	out.all = append(append([]*Kind(nil), t.all...), more...)
	return &out
}

// All returns the kinds in order. The slice is the caller's; the kinds are shared.
func (t *KindTable) All() []*Kind { return append([]*Kind(nil), t.all...) }

// Lookup returns the kind a word names, in any case: its name, singular, plural or short name ("NodePool",
// "nodepool", "nodepools", "np"); nil when none does.
func (t *KindTable) Lookup(word string) *Kind {
	w := strings.ToLower(word)
	for _, k := range t.all {
		if strings.EqualFold(w, k.Name) || w == k.Singular || w == k.Plural || w == k.Short {
			return k
		}
	}
	return nil
}

// Check returns an error naming the first kind described wrong: a missing word, a word two kinds share, a parent
// or referenced kind outside the table, a child of a child, a reference to a child kind, a column without a path.
func (t *KindTable) Check() error {
	seen := map[string]string{}
	in := map[*Kind]bool{}
	for _, k := range t.all {
		in[k] = true
	}
	for _, k := range t.all {
		if k.Name == "" || k.Singular == "" || k.Plural == "" || k.Short == "" || k.SpecSchema == "" {
			return fmt.Errorf("kind %q: name, singular, plural, short name and spec schema are required", k.Name)
		}
		for _, w := range []string{strings.ToLower(k.Name), k.Singular, k.Plural, k.Short} {
			if other, dup := seen[w]; dup && other != k.Name {
				return fmt.Errorf("kinds %s and %s are both called %q", other, k.Name, w)
			}
			seen[w] = k.Name
		}
		if k.NameMin < 1 || k.NameMax < k.NameMin || k.NameMax > 63 {
			return fmt.Errorf("kind %s: name length %d–%d is outside 1–63", k.Name, k.NameMin, k.NameMax)
		}
		if k.Parent != nil && (!in[k.Parent] || k.Parent.Parent != nil) {
			return fmt.Errorf("kind %s: its parent must be a root kind of the table", k.Name)
		}
		for _, r := range k.References {
			if r.Field == "" || r.Kind == nil || !in[r.Kind] || r.Kind.Parent != nil {
				return fmt.Errorf("kind %s: reference %q must name a root kind of the table", k.Name, r.Field)
			}
		}
		for _, r := range k.ReportedReferences {
			if r.Adapter == "" || r.DataKey == "" || r.Kind == nil || !in[r.Kind] || r.Kind.Parent != nil {
				return fmt.Errorf("kind %s: reported reference %s/%s must name a root kind of the table", k.Name, r.Adapter, r.DataKey)
			}
		}
		for _, c := range k.Columns {
			if c.Header == "" || !strings.Contains(c.JSONPath, "{") {
				return fmt.Errorf("kind %s: column %q needs a header and a JSONPath template such as {.spec.x}", k.Name, c.Header)
			}
		}
	}
	return nil
}

// CollectionPath is the path, below BasePath, of the kind's collection: "/clusters", or for a child kind
// "/clusters/<parent>/nodepools", or "/nodepools" (every parent's; read-only) when parent is uuid.Nil.
func (k *Kind) CollectionPath(parent uuid.UUID) string {
	if k.Parent == nil || parent == uuid.Nil {
		return "/" + k.Plural
	}
	return k.Parent.ResourcePath(ResourceRef{ID: parent}) + "/" + k.Plural
}

// ResourcePath is the path, below BasePath, of one resource: "/clusters/<id>", "/clusters/<parent>/nodepools/<id>".
func (k *Kind) ResourcePath(r ResourceRef) string {
	if k.Parent == nil {
		return "/" + k.Plural + "/" + r.ID.String()
	}
	return k.CollectionPath(r.Parent) + "/" + r.ID.String()
}

// ResourceRef names one resource: its id and, for a child kind, its parent's.
type ResourceRef struct {
	Parent, ID uuid.UUID
}

// RefOf returns the reference of a resource the API returned.
func RefOf(r *Resource) ResourceRef {
	ref := ResourceRef{ID: r.Id}
	if r.OwnerReferences != nil {
		ref.Parent = r.OwnerReferences.Id
	}
	return ref
}
