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
	interval                         time.Duration
	listOnly                         bool // list: the kind, no names
}

const getLong = `Shows resources of one kind as a table, or as the API's JSON (-o json), YAML, or kind/name lines.

With names or ids it shows those resources (and finds ones being deleted); without, a page of the kind, which
--search (the API's search language), --selector (labels), --order, --size and --page choose, or all of them
with --all. Node pools are listed per cluster with --cluster, or across every cluster without it.

--watch keeps the table on screen and redraws it when something changes (it polls every --interval);
Ctrl-C ends it.`

const getExample = `  hyperfleet get clusters
  hyperfleet get cluster demo -o yaml
  hyperfleet get np --cluster demo -o wide
  hyperfleet list clusters -l env=dev --search "name like 'de%'" --order "created_time desc"
  hyperfleet get vs --all -o name
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
	o.output = a.addOutputFlag(cmd, formatTable, formatWide, formatJSON, formatYAML, formatName)
	addClusterFlag(a, cmd, &o.cluster)
	fs.StringVar(&o.search, "search", "", "search expression, e.g. \"labels.env = 'dev' and status.phase != 'Ready'\"")
	fs.StringVarP(&o.selector, "selector", "l", "", "label selector, e.g. env=dev,tier!=db")
	fs.StringVar(&o.order, "order", "", "sort keys, e.g. \"name\" or \"created_time desc\" (default: created_time)")
	fs.IntVar(&o.size, "size", 0, "items per page (default: the API's, 20; at most 500)")
	fs.IntVar(&o.page, "page", 0, "page to show (default 1)")
	fs.BoolVar(&o.all, "all", false, "page through everything")
	fs.BoolVar(&o.includeDeleted, "include-deleted", false, "also show resources being deleted")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "leave out the table header")
	fs.BoolVarP(&o.watch, "watch", "w", false, "redraw when something changes, until Ctrl-C")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "how often --watch polls")
	return cmd
}

// addClusterFlag adds --cluster, which names the cluster of a node pool.
func addClusterFlag(a *app, cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "cluster", "", "the cluster (name or id) of the node pools")
	a.setup(cmd.RegisterFlagCompletionFunc("cluster", a.completeClusters))
}

// kindAndNames reads "KIND NAME..." or "KIND/NAME ..." (as -o name prints them).
func (a *app) kindAndNames(args []string) (*kind, []string, error) {
	word, first, slash := strings.Cut(args[0], "/")
	k, err := a.kinds.lookup(word)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	if slash {
		names = append(names, first)
	}
	for _, arg := range args[1:] {
		if w, name, ok := strings.Cut(arg, "/"); ok {
			other, err := a.kinds.lookup(w)
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
	if o.interval <= 0 {
		return usageErrorf("--interval must be positive")
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
	params := api.ListClustersParams{}
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
		l := &listing{kind: k, envelope: page{Kind: pg.Kind, Page: pg.Page, Size: pg.Size, Total: pg.Total}, single: len(names) == 1}
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
		r := &redraw{w: a.stdout, tty: isTerminal(a.stdout), format: o.output.value, noHeaders: o.noHeaders, now: time.Now}
		err := newSource(o.interval, fetch, a.warner()).follow(ctx, r.draw)
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
	format := o.output.value
	if len(l.objects) == 0 && (format == formatTable || format == formatWide) {
		if len(names) == 0 {
			fmt.Fprintf(a.stderr, "No %s found.\n", k.plural)
		}
	} else if err := printListing(a.stdout, format, l, time.Now(), o.noHeaders); err != nil {
		return err
	}
	if env := l.envelope; len(names) == 0 && !o.all && len(l.objects) > 0 {
		if upTo := int64((env.Page-1)*env.Size + len(l.objects)); upTo < env.Total {
			fmt.Fprintf(a.stderr, "Showing %d of %d %s: --page %d or --all for more.\n", len(l.objects), env.Total, k.plural, env.Page+1)
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
			live[key{o.ref().parent, o.name()}] = true
		}
	}
	out := objs[:0:0]
	for _, o := range objs {
		if !o.deleting() || !live[key{o.ref().parent, o.name()}] {
			out = append(out, o)
		}
	}
	return out
}

// missing is the error for names that no shown resource has, nil when each has one.
func missing(k *kind, names []string, objs []*object) error {
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
		return &notFoundError{kind: k, name: lost[0]}
	default:
		return fmt.Errorf("%s not found: %q", k.plural, lost)
	}
}
