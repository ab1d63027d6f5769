package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// getOptions are the flags of get and list.
type getOptions struct {
	output                           *outputFlag
	cluster, search, selector, order string
	size, page                       int
	all, includeDeleted, noHeaders   bool
	watch                            bool
	interval                         time.Duration // deprecated: --watch follows the change feed
	listOnly                         bool          // list: the kind, no names
}

const getLong = `Shows resources of one kind as a table (-o wide adds columns), as the API's JSON (-o json), YAML, kind/name
lines, or through a template: -o jsonpath=TEMPLATE, -o go-template=TEMPLATE or -o custom-columns=HEADER:.path,…
(kubectl's syntax; the document is the resource for one name, else the page with its items).

With names or ids it shows those resources (and finds ones being deleted); without, a page of the kind, which
--search (the API's search language), --selector (labels, kubectl's syntax: env=dev,tier!=db,env in (a,b),team),
--order, --size and --page choose, or all of them with --all. Node pools are listed per cluster with --cluster, or
across every cluster without it.

--watch shows the resources, then follows the API's change feed and shows them again after each change (on a
terminal the screen is redrawn); it resumes after a disconnect and lists again when the API asks it to. Ctrl-C
ends it.`

const getExample = `  hyperfleet get clusters
  hyperfleet get cluster demo -o yaml
  hyperfleet get np --cluster demo -o wide
  hyperfleet list clusters -l 'env in (dev,test)' --search "name like 'de%'" --order "created_time desc"
  hyperfleet get vs --all -o name
  hyperfleet get clusters -o jsonpath='{range .items[*]}{.name}{"\t"}{.status.phase}{"\n"}{end}'
  hyperfleet get np --cluster demo -o custom-columns=NAME:.name,REPLICAS:.spec.replicas
  hyperfleet get clusters --watch`

// newGetCommand builds get (use "get", names allowed) or list (use "list", the kind only).
func newGetCommand(a *app, use string) *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:               use + " KIND [NAME|ID ...]",
		Short:             "Show resources: a table, JSON, YAML or names; --watch follows changes",
		Long:              getLong,
		Example:           getExample,
		Args:              usageArgs(cobra.MinimumNArgs(1)),
		ValidArgsFunction: a.completeKindAndNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.get(cmd.Context(), o, args)
		},
	}
	if use == "list" {
		cmd.Use = "list KIND"
		cmd.Short = "List resources of a kind (get without names)"
		cmd.Args = usageArgs(cobra.ExactArgs(1))
		o.listOnly = true
	}
	fs := cmd.Flags()
	o.output = a.addOutputFlag(cmd, append([]string{formatTable, formatWide, formatJSON, formatYAML, formatName}, templatedFormats()...)...)
	addClusterFlag(a, cmd, &o.cluster)
	fs.StringVar(&o.search, "search", "", "search expression, e.g. \"labels.env = 'dev' and status.phase != 'Ready'\"")
	fs.StringVarP(&o.selector, "selector", "l", "", "label selector, e.g. env=dev,tier!=db")
	fs.StringVar(&o.order, "order", "", "sort keys, e.g. \"name\" or \"created_time desc\" (default: created_time)")
	fs.IntVar(&o.size, "size", 0, "items per page (default: the API's, 20; at most 500)")
	fs.IntVar(&o.page, "page", 0, "page to show (default 1)")
	fs.BoolVar(&o.all, "all", false, "page through everything")
	fs.BoolVar(&o.includeDeleted, "include-deleted", false, "also show resources being deleted")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "leave out the table header")
	fs.BoolVarP(&o.watch, "watch", "w", false, "follow the change feed and show each change, until Ctrl-C")
	fs.DurationVar(&o.interval, "interval", 0, "ignored: --watch follows the API's change feed")
	a.setup(fs.MarkDeprecated("interval", "--watch follows the API's change feed; the flag does nothing"))
	return cmd
}

// addClusterFlag adds --cluster, which names the cluster of a node pool.
func addClusterFlag(a *app, cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "cluster", "", "the cluster (name or id) of the node pools")
	a.setup(cmd.RegisterFlagCompletionFunc("cluster", a.completeClusters))
}

// kindAndNames reads "KIND NAME..." or "KIND/NAME ..." (as -o name prints them).
func (a *app) kindAndNames(args []string) (*api.Kind, []string, error) {
	word, first, slash := strings.Cut(args[0], "/")
	k, err := a.lookupKind(word)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	if slash {
		names = append(names, first)
	}
	for _, arg := range args[1:] {
		if w, name, ok := strings.Cut(arg, "/"); ok {
			other, err := a.lookupKind(w)
			if err != nil {
				return nil, nil, err
			}
			if other != k {
				return nil, nil, usageErrorf("%s and %s: one kind at a time", args[0], arg)
			}
			arg = name
		}
		names = append(names, arg)
	}
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			return nil, nil, usageErrorf("an empty name")
		}
	}
	return k, names, nil
}

func (a *app) get(ctx context.Context, o *getOptions, args []string) error {
	k, names, err := a.kindAndNames(args)
	if err != nil {
		return err
	}
	if o.listOnly && len(names) > 0 {
		return usageErrorf("list takes a kind only; get shows resources by name")
	}
	if o.all && o.page != 0 {
		return usageErrorf("--all and --page: give one")
	}
	p, err := newPrinter(o.output.value, o.noHeaders)
	if err != nil {
		return err
	}
	selector, err := selectorSearch(o.selector)
	if err != nil {
		return err
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	parent, parentObj, err := c.parent(ctx, k, o.cluster)
	if err != nil {
		return err
	}
	known := map[uuid.UUID]string{}
	if parentObj != nil {
		known[parent] = parentObj.name()
	}
	params := api.ListParams{}
	if s := andSearch(o.search, selector, namesSearch(names)); s != "" {
		params.Search = &s
	}
	if o.order != "" {
		params.Order = &o.order
	}
	switch {
	case o.size > 0:
		params.Size = &o.size
	case len(names) > 0:
		params.Size = ptr(maxPageSize) // every resource named, not the API's default page of them
	}
	if o.page > 0 {
		params.Page = &o.page
	}
	// A table's report columns come with the page (statuses=); other formats print the resources as they are.
	var columns []reportColumn
	var adapters []string
	if o.output.value == formatTable || o.output.value == formatWide {
		columns, adapters = reportColumns(a.kinds, k)
		params = withReports(params, adapters)
	}
	// A resource named on the command line is shown while it is being deleted too, as kubectl shows a
	// terminating pod.
	if o.includeDeleted || len(names) > 0 {
		params.IncludeDeleted = ptr(true)
	}
	fetch := func(ctx context.Context) (*listing, error) {
		var pg *page
		var err error
		if o.all {
			pg, err = c.listAll(ctx, k, parent, params)
		} else {
			pg, err = c.list(ctx, k, parent, params)
		}
		if err != nil {
			return nil, err
		}
		l := &listing{kind: k, envelope: page{Kind: pg.Kind, Page: pg.Page, Size: pg.Size, Total: pg.Total,
			ResourceVersion: pg.ResourceVersion}, single: len(names) == 1, reports: columns}
		for _, raw := range pg.Items {
			obj, err := decodeObject(raw)
			if err != nil {
				return nil, err
			}
			l.objects = append(l.objects, obj)
		}
		if len(names) > 0 {
			if !o.includeDeleted {
				l.objects = preferLive(l.objects)
			}
			l.envelope.Page, l.envelope.Size, l.envelope.Total = 1, len(l.objects), int64(len(l.objects))
		}
		l.parents, err = c.parentNames(ctx, k, l.objects, known)
		return l, err
	}

	if o.watch {
		r := &redraw{w: a.stdout, tty: isTerminal(a.stdout), printer: p, now: time.Now}
		f := &feed{c: c, kind: k, parent: parent, params: params, adapters: adapters, list: fetch, warn: a.warner(), retry: time.Second}
		err := f.follow(ctx, r.draw)
		select {
		case <-ctx.Done():
			return nil // Ctrl-C is how a watch ends
		default:
			return err
		}
	}

	l, err := fetch(ctx)
	if err != nil {
		return err
	}
	if len(l.objects) == 0 && p.tabular() {
		if len(names) == 0 {
			fmt.Fprintf(a.stderr, "No %s found.\n", k.Plural)
		}
	} else if err := p.print(a.stdout, l, time.Now()); err != nil {
		return err
	}
	if env := l.envelope; len(names) == 0 && !o.all && len(l.objects) > 0 {
		if upTo := int64((env.Page-1)*env.Size + len(l.objects)); upTo < env.Total {
			fmt.Fprintf(a.stderr, "Showing %d of %d %s: --page %d or --all for more.\n", len(l.objects), env.Total, k.Plural, env.Page+1)
		}
	}
	return missing(k, names, l.objects)
}

// preferLive drops, for each name, the resources being deleted when a live one has the name: a name belongs to
// at most one live resource (per cluster, for node pools), and that is the one a name means.
func preferLive(objs []*object) []*object {
	type key struct {
		parent uuid.UUID
		name   string
	}
	live := map[key]bool{}
	for _, o := range objs {
		if !o.deleting() {
			live[key{o.ref().Parent, o.name()}] = true
		}
	}
	out := objs[:0:0]
	for _, o := range objs {
		if !o.deleting() || !live[key{o.ref().Parent, o.name()}] {
			out = append(out, o)
		}
	}
	return out
}

// missing is the error for names that no shown resource has, nil when each has one.
func missing(k *api.Kind, names []string, objs []*object) error {
	var lost []string
	for _, n := range names {
		found := false
		for _, o := range objs {
			if o.matches(n) {
				found = true
				break
			}
		}
		if !found {
			lost = append(lost, n)
		}
	}
	switch len(lost) {
	case 0:
		return nil
	case 1:
		return &notFoundError{what: k.Singular, name: lost[0]}
	default:
		return fmt.Errorf("%s not found: %q", k.Plural, lost)
	}
}
