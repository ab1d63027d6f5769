package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

type applyOptions struct {
	output  *outputFlag
	files   []string
	cluster string
}

const applyLong = `Makes resources match files: each document is created if no live resource of its kind has its name,
and otherwise the document is the resource's desired state: its spec replaces the resource's spec whole (members
the file leaves out are removed, and the API fills their defaults again), and its labels, when it has any, replace
the resource's labels. A document without labels leaves the labels alone. A resource the file already matches is
reported unchanged and not touched. To change a few members only, use patch.

Documents are YAML or JSON, several per file separated by "---" lines, applied in order:

  kind: versionstream
  name: stable-4-16
  spec: {target_version: "4.16"}
  ---
  kind: cluster
  name: demo
  labels: {env: dev}
  spec: {version_stream: stable-4-16, hosted_cluster: {dns: {base_domain: example.com}}}
  ---
  kind: nodepool
  name: workers
  cluster: demo
  spec: {replicas: 3, platform: {hivelocity: {device_type: s1.small, region: LAX2}}}

What "get -o yaml" prints can be applied back as well.`

func newApplyCommand(a *app) *cobra.Command {
	o := &applyOptions{}
	cmd := &cobra.Command{
		Use:     "apply -f FILE",
		Short:   "Create or update resources from YAML or JSON files (idempotent)",
		Long:    applyLong,
		Example: "  hyperfleet apply -f fleet.yaml\n  hyperfleet get cluster demo -o yaml | sed 's/env: dev/env: prod/' | hyperfleet apply -f -",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(o.files) == 0 {
				return usageErrorf("-f FILE is needed (- reads stdin)")
			}
			return a.apply(cmd.Context(), o)
		},
	}
	o.output = a.addOutputFlag(cmd, "", formatName, formatJSON, formatYAML)
	cmd.Flags().StringArrayVarP(&o.files, "filename", "f", nil, "file to apply (YAML or JSON; - for stdin; repeatable)")
	a.setup(cmd.MarkFlagFilename("filename", "yaml", "yml", "json"))
	cmd.Flags().StringVar(&o.cluster, "cluster", "", "the cluster of node pools whose document names none")
	a.setup(cmd.RegisterFlagCompletionFunc("cluster", a.completeClusters))
	return cmd
}

func (a *app) apply(ctx context.Context, o *applyOptions) error {
	var docs []*manifest
	for _, f := range o.files {
		more, err := readManifests(f, a.stdin)
		if err != nil {
			return err
		}
		docs = append(docs, more...)
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	failed := 0
	for _, m := range docs {
		if m.Cluster == "" && m.OwnerReferences == nil {
			m.Cluster = o.cluster
		}
		k, obj, what, err := a.applyOne(ctx, c, m)
		if err == nil {
			err = printResult(a.stdout, o.output.value, k, obj, what)
		}
		if err != nil {
			// Like kubectl, one bad document does not stop the others.
			failed++
			a.printError(fmt.Errorf("%s: %w", m.source, err))
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d documents not applied", failed, len(docs))
	}
	return nil
}

// applyOne creates or patches the resource m describes and says which it did: created, configured or unchanged.
func (a *app) applyOne(ctx context.Context, c *client, m *manifest) (*api.Kind, *object, string, error) {
	if m.Kind == "" || m.Name == "" {
		return nil, nil, "", usageErrorf("a document needs kind and name")
	}
	k, err := a.lookupKind(m.Kind)
	if err != nil {
		return nil, nil, "", err
	}
	if k.Parent != nil && m.cluster() == "" {
		return nil, nil, "", usageErrorf("%s %s needs its %s: %[3]s in the document, or --%[3]s", k.Singular, m.Name, k.Parent.Singular)
	}
	current, err := c.resolve(ctx, k, m.cluster(), m.Name, false)
	var nf *notFoundError
	if errors.As(err, &nf) {
		obj, err := c.create(ctx, k, m)
		return k, obj, "created", err
	}
	if err != nil {
		return nil, nil, "", err
	}
	patch, err := applyPatch(current, m)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s/%s: %w", k.Singular, m.Name, err)
	}
	if patch == nil {
		return k, current, "unchanged", nil
	}
	updated, err := c.patch(ctx, k, current.ref(), nil, patch)
	if err != nil {
		return nil, nil, "", err
	}
	// The API may still find nothing to change (a default written out, a label map in another order).
	if deref(updated.UpdatedTime).Equal(deref(current.UpdatedTime)) {
		return k, updated, "unchanged", nil
	}
	return k, updated, "configured", nil
}

// applyPatch is the merge patch that makes current's spec the document's spec, and current's labels the document's
// labels when it has any, or nil when that changes nothing. The patch names only what differs, so that what the
// document repeats unchanged is not sent: the internal spec fields of what get printed, which only an admin may
// write, and the members the API defaults.
func applyPatch(current *object, m *manifest) (json.RawMessage, error) {
	type state struct {
		Labels             any   `json:"labels,omitempty"`
		Spec               any   `json:"spec,omitempty"`
		DeletionProtection *bool `json:"deletion_protection,omitempty"`
	}
	have, want := state{}, state{}
	if m.DeletionProtection != nil {
		have.DeletionProtection, want.DeletionProtection = current.DeletionProtection, m.DeletionProtection
		if have.DeletionProtection == nil {
			have.DeletionProtection = new(bool)
		}
	}
	if m.Labels != nil {
		have.Labels, want.Labels = deref(current.Labels), m.presentLabels()
	}
	if m.Spec != nil {
		have.Spec, want.Spec = deref(current.Spec), m.Spec
	}
	haveJSON, err := json.Marshal(have)
	if err != nil {
		return nil, err
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.CreateMergePatch(haveJSON, wantJSON)
	if err != nil {
		return nil, fmt.Errorf("compute the patch: %w", err)
	}
	if string(patch) == "{}" {
		return nil, nil
	}
	return patch, nil
}

// patch sends a merge patch of spec and/or labels, conditional on resource_version ifMatch when it is not nil.
func (c *client) patch(ctx context.Context, k *api.Kind, r api.ResourceRef, ifMatch *int64, patch json.RawMessage) (*object, error) {
	var params api.PatchParams
	if ifMatch != nil {
		params.IfMatch = ptr(fmt.Sprintf("%q", fmt.Sprint(*ifMatch)))
	}
	return c.send(func(body io.Reader) (*http.Response, error) {
		return c.gen.PatchResourceWithBody(ctx, k, r, &params, contentMergePatch, body)
	}, patch)
}
