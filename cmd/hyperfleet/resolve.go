package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// notFoundError is a name or id that no resource of the kind has.
type notFoundError struct {
	kind   *kind
	name   string
	parent string // the --cluster it was looked for under, if any
}

func (e *notFoundError) Error() string {
	if e.parent != "" {
		return fmt.Sprintf("%s %q not found in cluster %q", e.kind.name, e.name, e.parent)
	}
	return fmt.Sprintf("%s %q not found", e.kind.name, e.name)
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

// selectorSearch turns a label selector, "env=dev,tier!=db", into a search expression. Keys go in brackets, so that
// any key the API accepts (dashes, dots, a prefix/) can be written.
func selectorSearch(selector string) (string, error) {
	var terms []string
	for term := range strings.SplitSeq(selector, ",") {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		op := "="
		key, value, ok := strings.Cut(term, "!=")
		if ok {
			op = "!="
		} else if key, value, ok = strings.Cut(term, "=="); !ok {
			key, value, ok = strings.Cut(term, "=")
		}
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return "", usageErrorf("--selector %q: want key=value or key!=value, comma-separated", term)
		}
		terms = append(terms, fmt.Sprintf("labels[%s] %s %s", tslString(key), op, tslString(strings.TrimSpace(value))))
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
func (c *client) find(ctx context.Context, k *kind, parent uuid.UUID, nameOrID string, includeDeleted bool) (*object, error) {
	search := namesSearch([]string{nameOrID})
	pg, err := c.list(ctx, k, parent, api.ListClustersParams{
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
			in = append(in, names[o.ref().parent])
		}
		sort.Strings(in)
		return nil, usageErrorf("%s %q exists in clusters %s: name one with --cluster", k.name, nameOrID, strings.Join(in, ", "))
	case includeDeleted && len(deleting) > 0:
		return deleting[0], nil
	}
	return nil, &notFoundError{kind: k, name: nameOrID}
}

// parent resolves --cluster for kind k: uuid.Nil and no object when it is not given. A cluster being deleted
// still counts, so that its node pools can be looked at while they go.
func (c *client) parent(ctx context.Context, k *kind, cluster string) (uuid.UUID, *object, error) {
	if cluster == "" {
		return uuid.Nil, nil, nil
	}
	if k.parent == nil {
		return uuid.Nil, nil, usageErrorf("--cluster applies to node pools only, not to %s", k.plural)
	}
	o, err := c.find(ctx, k.parent, uuid.Nil, cluster, true)
	if err != nil {
		return uuid.Nil, nil, err
	}
	return o.Id, o, nil
}

// resolve finds the one resource a command acts on, under --cluster for a node pool.
func (c *client) resolve(ctx context.Context, k *kind, cluster, nameOrID string, includeDeleted bool) (*object, error) {
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
func (c *client) parentNames(ctx context.Context, k *kind, objs []*object, known map[uuid.UUID]string) (map[uuid.UUID]string, error) {
	if k.parent == nil {
		return nil, nil
	}
	names := make(map[uuid.UUID]string, len(known))
	for id, n := range known {
		names[id] = n
	}
	var missing []string
	seen := map[uuid.UUID]bool{}
	for _, o := range objs {
		id := o.ref().parent
		if _, ok := names[id]; !ok && id != uuid.Nil && !seen[id] {
			seen[id] = true
			missing = append(missing, id.String())
		}
	}
	for len(missing) > 0 {
		batch := missing[:min(len(missing), maxIDsPerSearch)]
		missing = missing[len(batch):]
		search := namesSearch(batch)
		pg, err := c.list(ctx, k.parent, uuid.Nil, api.ListClustersParams{
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
