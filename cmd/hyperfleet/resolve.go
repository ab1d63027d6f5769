package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// notFoundError is a name or id that nothing of its kind has: a resource (what is its kind's singular) or a
// context. It exits with exitNotFound.
type notFoundError struct {
	what   string
	name   string
	parent string // the --cluster it was looked for under, if any
}

func (e *notFoundError) Error() string {
	if e.parent != "" {
		return fmt.Sprintf("%s %q not found in cluster %q", e.what, e.name, e.parent)
	}
	return fmt.Sprintf("%s %q not found", e.what, e.name)
}

// tslString quotes s as a string literal of the API's search language.
func tslString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// andSearch joins search expressions with "and", leaving out empty ones.
func andSearch(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			kept = append(kept, "("+p+")")
		}
	}
	if len(kept) == 1 {
		return strings.TrimSuffix(strings.TrimPrefix(kept[0], "("), ")")
	}
	return strings.Join(kept, " and ")
}

// selectorSearch turns a label selector in Kubernetes' syntax ("env=dev,tier!=db", "env in (dev,test)",
// "team", parsed by apimachinery) into a search expression. Keys go in brackets, so that any key the API accepts
// (dashes, dots, a prefix/) can be written. The API's search cannot ask that a label be absent, so "!key" is a
// usage error; and, unlike Kubernetes, "key!=value" and "key notin (…)" match only resources that have the label.
func selectorSearch(selector string) (string, error) {
	if strings.TrimSpace(selector) == "" {
		return "", nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return "", usageErrorf("--selector %q: %v", selector, err)
	}
	reqs, _ := sel.Requirements()
	terms := make([]string, 0, len(reqs))
	for _, r := range reqs {
		key := "labels[" + tslString(r.Key()) + "]"
		values := r.ValuesUnsorted()
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = tslString(v)
		}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals:
			terms = append(terms, key+" = "+quoted[0])
		case selection.NotEquals:
			terms = append(terms, key+" != "+quoted[0])
		case selection.In:
			terms = append(terms, key+" in ["+strings.Join(quoted, ", ")+"]")
		case selection.NotIn:
			terms = append(terms, key+" not in ["+strings.Join(quoted, ", ")+"]")
		case selection.Exists:
			terms = append(terms, key+" like '%'")
		default:
			return "", usageErrorf("--selector %q: the API's search cannot select by %s on %q (=, ==, !=, in, notin and a bare key work)", selector, r.Operator(), r.Key())
		}
	}
	return strings.Join(terms, " and "), nil
}

// namesSearch selects the resources that args name, each a name or an id.
func namesSearch(args []string) string {
	var names, ids []string
	for _, a := range args {
		if _, err := uuid.Parse(a); err == nil {
			ids = append(ids, tslString(a))
		} else {
			names = append(names, tslString(a))
		}
	}
	var terms []string
	if len(names) > 0 {
		terms = append(terms, "name in ["+strings.Join(names, ", ")+"]")
	}
	if len(ids) > 0 {
		terms = append(terms, "id in ["+strings.Join(ids, ", ")+"]")
	}
	return strings.Join(terms, " or ")
}

// matches reports whether o is the resource arg names, by name or id.
func (o *object) matches(arg string) bool {
	return o.name() == arg || o.Id.String() == arg
}

// find returns the resource that nameOrID names among kind k (under parent for a node pool; among every cluster's
// when parent is uuid.Nil): the live one, or else, when includeDeleted, the newest one being deleted. Names are
// unique among live resources (per cluster for node pools), so only node pools looked for across clusters can
// be ambiguous; that is an error that asks for --cluster.
func (c *client) find(ctx context.Context, k *api.Kind, parent uuid.UUID, nameOrID string, includeDeleted bool) (*object, error) {
	search := namesSearch([]string{nameOrID})
	pg, err := c.list(ctx, k, parent, api.ListParams{
		Search: &search, IncludeDeleted: ptr(true), Order: ptr("created_time desc"), Size: ptr(maxPageSize),
	})
	if err != nil {
		return nil, err
	}
	var live, deleting []*object
	for _, raw := range pg.Items {
		o, err := decodeObject(raw)
		if err != nil {
			return nil, err
		}
		if o.deleting() {
			deleting = append(deleting, o)
		} else {
			live = append(live, o)
		}
	}
	switch {
	case len(live) == 1:
		return live[0], nil
	case len(live) > 1:
		names, err := c.parentNames(ctx, k, live, nil)
		if err != nil {
			return nil, err
		}
		var in []string
		for _, o := range live {
			in = append(in, names[o.ref().Parent])
		}
		sort.Strings(in)
		return nil, usageErrorf("%s %q exists in clusters %s: name one with --cluster", k.Singular, nameOrID, strings.Join(in, ", "))
	case includeDeleted && len(deleting) > 0:
		return deleting[0], nil
	}
	return nil, &notFoundError{what: k.Singular, name: nameOrID}
}

// parent resolves --cluster for kind k: uuid.Nil and no object when it is not given. A cluster being deleted
// still counts, so that its node pools can be looked at while they go.
func (c *client) parent(ctx context.Context, k *api.Kind, cluster string) (uuid.UUID, *object, error) {
	if cluster == "" {
		return uuid.Nil, nil, nil
	}
	if k.Parent == nil {
		return uuid.Nil, nil, usageErrorf("--cluster applies to node pools only, not to %s", k.Plural)
	}
	o, err := c.find(ctx, k.Parent, uuid.Nil, cluster, true)
	if err != nil {
		return uuid.Nil, nil, err
	}
	return o.Id, o, nil
}

// resolve finds the one resource a command acts on, under --cluster for a node pool.
func (c *client) resolve(ctx context.Context, k *api.Kind, cluster, nameOrID string, includeDeleted bool) (*object, error) {
	parent, _, err := c.parent(ctx, k, cluster)
	if err != nil {
		return nil, err
	}
	o, err := c.find(ctx, k, parent, nameOrID, includeDeleted)
	var nf *notFoundError
	if errors.As(err, &nf) {
		nf.parent = cluster
	}
	return o, err
}

// maxIDsPerSearch keeps an `id in [...]` search under the API's limit of 200 terms.
const maxIDsPerSearch = 150

// parentNames maps the clusters that the node pools objs belong to onto their names, starting from known; one
// list request per 150 unknown clusters. Other kinds have no parents and get nil.
func (c *client) parentNames(ctx context.Context, k *api.Kind, objs []*object, known map[uuid.UUID]string) (map[uuid.UUID]string, error) {
	if k.Parent == nil {
		return nil, nil
	}
	names := make(map[uuid.UUID]string, len(known))
	for id, n := range known {
		names[id] = n
	}
	var missing []string
	seen := map[uuid.UUID]bool{}
	for _, o := range objs {
		id := o.ref().Parent
		if _, ok := names[id]; !ok && id != uuid.Nil && !seen[id] {
			seen[id] = true
			missing = append(missing, id.String())
		}
	}
	for len(missing) > 0 {
		batch := missing[:min(len(missing), maxIDsPerSearch)]
		missing = missing[len(batch):]
		search := namesSearch(batch)
		pg, err := c.list(ctx, k.Parent, uuid.Nil, api.ListParams{
			Search: &search, IncludeDeleted: ptr(true), Fields: ptr("name"), Size: ptr(maxPageSize),
		})
		if err != nil {
			return nil, err
		}
		for _, raw := range pg.Items {
			o, err := decodeObject(raw)
			if err != nil {
				return nil, err
			}
			names[o.Id] = o.name()
		}
	}
	return names, nil
}

// lookupKind returns the kind a user's word names: its name, singular, plural or short name, in any case.
func (a *app) lookupKind(word string) (*api.Kind, error) {
	if k := a.kinds.Lookup(word); k != nil {
		return k, nil
	}
	return nil, usageErrorf("unknown kind %q: want %s", word, a.describeKinds())
}

// describeKinds lists the kinds with their short names, for error messages and help: "clusters (cl), nodepools
// (np; children of a cluster: --cluster), …".
func (a *app) describeKinds() string {
	var names []string
	for _, k := range a.kinds.All() {
		if k.Parent != nil {
			names = append(names, fmt.Sprintf("%s (%s; children of a %s: --%s)", k.Plural, k.Short, k.Parent.Singular, k.Parent.Singular))
			continue
		}
		names = append(names, fmt.Sprintf("%s (%s)", k.Plural, k.Short))
	}
	return strings.Join(names, ", ")
}

// kindNames returns every kind's plural with its name and short name, sorted, for completion.
func (a *app) kindNames() []string {
	var out []string
	for _, k := range a.kinds.All() {
		out = append(out, k.Plural+"\t"+k.Name+" ("+k.Short+")")
	}
	sort.Strings(out)
	return out
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
