package main

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Dynamic completion: cobra's `completion bash|zsh|fish|powershell` scripts call `hyperfleet __complete …`,
// which ends up here. Kinds complete from the kind table; names are asked of the API (with the flags given so
// far, so --server, --token and --cluster count). A failing request completes nothing rather than erroring.

// completionTimeout keeps a shell responsive when the API is slow or away.
const completionTimeout = 3 * time.Second

// completeKinds completes the first argument with the kinds.
func (a *app) completeKinds(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return filterPrefix(a.kindNames(), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeKindAndNames completes a kind, then names of that kind.
func (a *app) completeKindAndNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return a.completeKinds(cmd, args, toComplete)
	}
	k, err := a.lookupKind(args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cluster := "" // commands without --cluster complete every cluster's node pools
	if f := cmd.Flags().Lookup("cluster"); f != nil {
		cluster = f.Value.String()
	}
	return a.completeNames(cmd.Context(), k, cluster, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeClusters completes --cluster.
func (a *app) completeClusters(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	k, err := a.lookupKind("clusters")
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeNames(cmd.Context(), k, "", toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeNames lists up to a page of names of kind k that start with prefix.
func (a *app) completeNames(ctx context.Context, k *api.Kind, cluster, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	c, err := a.connect()
	if err != nil {
		return nil
	}
	parent, _, err := c.parent(ctx, k, cluster)
	if err != nil {
		return nil
	}
	p := api.ListParams{Fields: ptr("name"), Size: ptr(maxPageSize), Order: ptr("name")}
	// Names are DNS labels; a prefix with anything else, such as a like pattern's % or _, matches none.
	if prefix != "" {
		if strings.Trim(prefix, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return nil
		}
		search := "name like " + tslString(prefix+"%")
		p.Search = &search
	}
	pg, err := c.list(ctx, k, parent, p)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, raw := range pg.Items {
		o, err := decodeObject(raw)
		if err != nil || o.Id == uuid.Nil || seen[o.name()] {
			continue
		}
		seen[o.name()] = true
		out = append(out, o.name())
	}
	return out
}

func filterPrefix(words []string, prefix string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out = append(out, w)
		}
	}
	return out
}
