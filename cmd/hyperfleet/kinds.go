package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// kind is a resource kind as the CLI addresses it. The generated client has one method per operation and kind, so
// each kind binds its methods here, once; every command is generic over kinds.
type kind struct {
	name   string // "cluster": singular, as in "cluster/demo"
	plural string // "clusters", as in the API's paths
	short  string // "cl"
	title  string // "Cluster", the API's kind
	parent *kind  // the cluster kind, for node pools
	// columns are the kind's own table columns, shown between NAME and PHASE; cells fills them for one resource.
	// parents maps a node pool's cluster id to its name.
	columns []string
	cells   func(raw json.RawMessage, parents map[uuid.UUID]string) ([]string, error)
	ops     kindOps
}

// ref is a resource's ids as the generated client takes them; parent is uuid.Nil for a root kind.
type ref struct{ parent, id uuid.UUID }

// kindOps are a kind's calls on the generated client. Each returns the raw answer, which client.do reads: the
// CLI prints the API's own JSON and problem documents, so it decodes answers itself.
type kindOps struct {
	// list lists the kind (under parent for a child kind; every parent's when parent is uuid.Nil).
	list     func(ctx context.Context, c api.ClientInterface, parent uuid.UUID, p api.ListClustersParams) (*http.Response, error)
	get      func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error)
	create   func(ctx context.Context, c api.ClientInterface, parent uuid.UUID, body io.Reader) (*http.Response, error)
	patch    func(ctx context.Context, c api.ClientInterface, r ref, p api.PatchClusterParams, body io.Reader) (*http.Response, error)
	remove   func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error)
	force    func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error)
	statuses func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error)
}

const (
	contentJSON       = "application/json"
	contentMergePatch = "application/merge-patch+json"
)

// kindSet is every kind the CLI knows, in the order help and completion list them.
type kindSet struct{ all []*kind }

func newKindSet() *kindSet {
	streams, schedules, clusters := versionStreamKind(), upgradeScheduleKind(), clusterKind()
	return &kindSet{all: []*kind{clusters, nodePoolKind(clusters), streams, schedules}}
}

// lookup returns the kind a user's word names: singular, plural or short name, in any case ("NodePool" too).
func (s *kindSet) lookup(word string) (*kind, error) {
	w := strings.ToLower(word)
	for _, k := range s.all {
		if w == k.name || w == k.plural || w == k.short {
			return k, nil
		}
	}
	return nil, usageErrorf("unknown kind %q: want %s", word, s.describe())
}

// describe lists the kinds with their short names, for error messages and help.
func (s *kindSet) describe() string {
	names := make([]string, len(s.all))
	for i, k := range s.all {
		names[i] = fmt.Sprintf("%s (%s)", k.plural, k.short)
	}
	return strings.Join(names, ", ")
}

func versionStreamKind() *kind {
	return &kind{
		name: "versionstream", plural: "versionstreams", short: "vs", title: "VersionStream",
		columns: []string{"TARGET", "CHANNEL", "RESOLVED"},
		cells: func(raw json.RawMessage, _ map[uuid.UUID]string) ([]string, error) {
			var v api.VersionStream
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, err
			}
			group := "stable" // the schema's default; the API fills it in, so this covers only odd answers
			if v.Spec.ChannelGroup != nil {
				group = string(*v.Spec.ChannelGroup)
			}
			// The resolved version itself is in the resolver's report, a request per stream away; the stream's own
			// Available condition says whether a release image is known, which is what a cluster needs.
			resolved := "Unknown"
			if c := findCondition(v.Status.Conditions, conditions.Available); c != nil {
				resolved = string(c.Status)
			}
			return []string{v.Spec.TargetVersion, group + "-" + v.Spec.TargetVersion, resolved}, nil
		},
		ops: kindOps{
			list: func(ctx context.Context, c api.ClientInterface, _ uuid.UUID, p api.ListClustersParams) (*http.Response, error) {
				q := api.ListVersionStreamsParams(p)
				return c.ListVersionStreams(ctx, &q)
			},
			get: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.GetVersionStream(ctx, r.id)
			},
			create: func(ctx context.Context, c api.ClientInterface, _ uuid.UUID, body io.Reader) (*http.Response, error) {
				return c.CreateVersionStreamWithBody(ctx, contentJSON, body)
			},
			patch: func(ctx context.Context, c api.ClientInterface, r ref, p api.PatchClusterParams, body io.Reader) (*http.Response, error) {
				q := api.PatchVersionStreamParams(p)
				return c.PatchVersionStreamWithBody(ctx, r.id, &q, contentMergePatch, body)
			},
			remove: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.DeleteVersionStream(ctx, r.id)
			},
			force: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.ForceDeleteVersionStream(ctx, r.id)
			},
			statuses: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.ListVersionStreamStatuses(ctx, r.id)
			},
		},
	}
}

func upgradeScheduleKind() *kind {
	return &kind{
		name: "upgradeschedule", plural: "upgradeschedules", short: "us", title: "UpgradeSchedule",
		columns: []string{"TIMEZONE", "WINDOWS"},
		cells: func(raw json.RawMessage, _ map[uuid.UUID]string) ([]string, error) {
			var s api.UpgradeSchedule
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, err
			}
			tz := "UTC"
			if s.Spec.Timezone != nil {
				tz = *s.Spec.Timezone
			}
			var windows []api.UpgradeWindow
			if s.Spec.Windows != nil {
				windows = *s.Spec.Windows
			}
			return []string{tz, windowsSummary(windows)}, nil
		},
		ops: kindOps{
			list: func(ctx context.Context, c api.ClientInterface, _ uuid.UUID, p api.ListClustersParams) (*http.Response, error) {
				q := api.ListUpgradeSchedulesParams(p)
				return c.ListUpgradeSchedules(ctx, &q)
			},
			get: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.GetUpgradeSchedule(ctx, r.id)
			},
			create: func(ctx context.Context, c api.ClientInterface, _ uuid.UUID, body io.Reader) (*http.Response, error) {
				return c.CreateUpgradeScheduleWithBody(ctx, contentJSON, body)
			},
			patch: func(ctx context.Context, c api.ClientInterface, r ref, p api.PatchClusterParams, body io.Reader) (*http.Response, error) {
				q := api.PatchUpgradeScheduleParams(p)
				return c.PatchUpgradeScheduleWithBody(ctx, r.id, &q, contentMergePatch, body)
			},
			remove: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.DeleteUpgradeSchedule(ctx, r.id)
			},
			force: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.ForceDeleteUpgradeSchedule(ctx, r.id)
			},
			statuses: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.ListUpgradeScheduleStatuses(ctx, r.id)
			},
		},
	}
}

func clusterKind() *kind {
	return &kind{
		name: "cluster", plural: "clusters", short: "cl", title: "Cluster",
		columns: []string{"VERSION STREAM"},
		cells: func(raw json.RawMessage, _ map[uuid.UUID]string) ([]string, error) {
			var c api.Cluster
			if err := json.Unmarshal(raw, &c); err != nil {
				return nil, err
			}
			return []string{c.Spec.VersionStream}, nil
		},
		ops: kindOps{
			list: func(ctx context.Context, c api.ClientInterface, _ uuid.UUID, p api.ListClustersParams) (*http.Response, error) {
				return c.ListClusters(ctx, &p)
			},
			get: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.GetCluster(ctx, r.id)
			},
			create: func(ctx context.Context, c api.ClientInterface, _ uuid.UUID, body io.Reader) (*http.Response, error) {
				return c.CreateClusterWithBody(ctx, contentJSON, body)
			},
			patch: func(ctx context.Context, c api.ClientInterface, r ref, p api.PatchClusterParams, body io.Reader) (*http.Response, error) {
				return c.PatchClusterWithBody(ctx, r.id, &p, contentMergePatch, body)
			},
			remove: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.DeleteCluster(ctx, r.id)
			},
			force: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.ForceDeleteCluster(ctx, r.id)
			},
			statuses: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.ListClusterStatuses(ctx, r.id)
			},
		},
	}
}

func nodePoolKind(clusters *kind) *kind {
	return &kind{
		name: "nodepool", plural: "nodepools", short: "np", title: "NodePool", parent: clusters,
		columns: []string{"CLUSTER", "REPLICAS"},
		cells: func(raw json.RawMessage, parents map[uuid.UUID]string) ([]string, error) {
			var p api.NodePool
			if err := json.Unmarshal(raw, &p); err != nil {
				return nil, err
			}
			cluster, ok := parents[p.OwnerReferences.Id]
			if !ok {
				cluster = p.OwnerReferences.Id.String()
			}
			return []string{cluster, fmt.Sprint(p.Spec.Replicas)}, nil
		},
		ops: kindOps{
			list: func(ctx context.Context, c api.ClientInterface, parent uuid.UUID, p api.ListClustersParams) (*http.Response, error) {
				if parent == uuid.Nil {
					q := api.ListNodePoolsParams(p)
					return c.ListNodePools(ctx, &q)
				}
				q := api.ListClusterNodePoolsParams(p)
				return c.ListClusterNodePools(ctx, parent, &q)
			},
			get: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.GetNodePool(ctx, r.parent, r.id)
			},
			create: func(ctx context.Context, c api.ClientInterface, parent uuid.UUID, body io.Reader) (*http.Response, error) {
				return c.CreateNodePoolWithBody(ctx, parent, contentJSON, body)
			},
			patch: func(ctx context.Context, c api.ClientInterface, r ref, p api.PatchClusterParams, body io.Reader) (*http.Response, error) {
				q := api.PatchNodePoolParams(p)
				return c.PatchNodePoolWithBody(ctx, r.parent, r.id, &q, contentMergePatch, body)
			},
			remove: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.DeleteNodePool(ctx, r.parent, r.id)
			},
			force: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.ForceDeleteNodePool(ctx, r.parent, r.id)
			},
			statuses: func(ctx context.Context, c api.ClientInterface, r ref) (*http.Response, error) {
				return c.ListNodePoolStatuses(ctx, r.parent, r.id)
			},
		},
	}
}

// windowsSummary renders upgrade windows compactly: "Sat,Sun 02:00+4h; Mon 22:00+2h". A schedule without
// windows is open whenever no blackout holds.
func windowsSummary(windows []api.UpgradeWindow) string {
	if len(windows) == 0 {
		return "always"
	}
	const shown = 2
	parts := make([]string, 0, shown+1)
	for i, w := range windows {
		if i == shown {
			parts = append(parts, fmt.Sprintf("+%d more", len(windows)-shown))
			break
		}
		days := make([]string, len(w.Days))
		for j, d := range w.Days {
			days[j] = string(d)[:min(3, len(d))]
		}
		parts = append(parts, fmt.Sprintf("%s %s+%s", strings.Join(days, ","), w.Start, w.Duration))
	}
	return strings.Join(parts, "; ")
}

// findCondition returns the first condition of type t, or nil.
func findCondition(conds []api.Condition, t string) *api.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// kindNames returns every word that names a kind, sorted, for completion.
func (s *kindSet) kindNames() []string {
	var out []string
	for _, k := range s.all {
		out = append(out, k.plural+"\t"+k.title+" ("+k.short+")")
	}
	sort.Strings(out)
	return out
}
