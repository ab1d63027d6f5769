package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// createBody is the body of every kind's create. The API decodes it strictly against the kind's schema (an
// unknown member is 400 HYPERFLEET-VAL-001), so the spec is passed through as written rather than through the
// generated types, which would drop what they do not know instead of letting the API say what is wrong.
type createBody struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Spec   json.RawMessage   `json:"spec"`
}

type createOptions struct {
	output                          *outputFlag
	spec, specFile, fromFile, label string
	cluster                         string
}

const createExample = `  hyperfleet create versionstream stable-4-16 --spec '{"target_version": "4.16"}'
  hyperfleet create cluster demo --spec-file cluster-spec.yaml --labels env=dev
  hyperfleet create nodepool workers --cluster demo --spec-file pool-spec.yaml
  hyperfleet create --from-file demo.yaml cluster`

func newCreateCommand(a *app) *cobra.Command {
	o := &createOptions{}
	cmd := &cobra.Command{
		Use:   "create KIND [NAME] (--spec JSON | --spec-file FILE | --from-file FILE)",
		Short: "Create a resource from a spec, or from a file holding the whole resource",
		Long: `Creates one resource. The spec comes inline (--spec, JSON or YAML), from a file holding only the spec
(--spec-file), or from a file holding the resource (--from-file: kind, name, labels, spec, cluster; see apply).
"-" reads the file from stdin. Node pools need their cluster: --cluster or the file's cluster.`,
		Example:           createExample,
		Args:              usageArgs(cobra.RangeArgs(1, 2)),
		ValidArgsFunction: a.completeKinds,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOneOf(cmd, true, "spec", "spec-file", "from-file"); err != nil {
				return err
			}
			return a.create(cmd.Context(), o, args)
		},
	}
	o.output = a.addOutputFlag(cmd, "", formatName, formatJSON, formatYAML)
	fs := cmd.Flags()
	fs.StringVar(&o.spec, "spec", "", "the spec, as JSON or YAML")
	fs.StringVar(&o.specFile, "spec-file", "", "file holding the spec (JSON or YAML; - for stdin)")
	fs.StringVar(&o.fromFile, "from-file", "", "file holding the resource: kind, name, labels, spec, cluster (- for stdin)")
	fs.StringVar(&o.label, "labels", "", "labels, e.g. env=dev,team=core")
	addClusterFlag(a, cmd, &o.cluster)
	return cmd
}

func (a *app) create(ctx context.Context, o *createOptions, args []string) error {
	k, names, err := a.kindAndNames(args)
	if err != nil {
		return err
	}
	if len(names) > 1 {
		return usageErrorf("create makes one resource at a time")
	}
	m := &manifest{Kind: k.name, Cluster: o.cluster, source: "the command line"}
	if o.fromFile != "" {
		docs, err := readManifests(o.fromFile, a.stdin)
		if err != nil {
			return err
		}
		if len(docs) != 1 {
			return usageErrorf("%s holds %d documents; create takes one (apply takes several)", o.fromFile, len(docs))
		}
		m = docs[0]
		if m.Kind != "" {
			if fk, err := a.kinds.lookup(m.Kind); err != nil || fk != k {
				return usageErrorf("%s is a %s, not a %s", m.source, m.Kind, k.name)
			}
		}
		if o.cluster != "" {
			m.Cluster = o.cluster
		}
	} else {
		if m.Spec, err = readObject("--spec", o.spec, o.specFile, a.stdin); err != nil {
			return err
		}
	}
	if len(names) == 1 {
		if m.Name != "" && m.Name != names[0] {
			return usageErrorf("the name is %s on the command line and %s in %s", names[0], m.Name, m.source)
		}
		m.Name = names[0]
	}
	if m.Name == "" {
		return usageErrorf("a name is needed: on the command line or in the file")
	}
	labels, err := parseLabels(o.label, false)
	if err != nil {
		return err
	}
	if len(labels) > 0 && m.Labels == nil {
		m.Labels = map[string]*string{}
	}
	for key, v := range labels {
		m.Labels[key] = v
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	obj, err := c.create(ctx, k, m)
	if err != nil {
		return err
	}
	return printResult(a.stdout, o.output.value, k, obj, "created")
}

// create creates the resource m describes.
func (c *client) create(ctx context.Context, k *kind, m *manifest) (*object, error) {
	if len(m.Spec) == 0 {
		return nil, usageErrorf("%s: %s/%s has no spec", m.source, k.name, m.Name)
	}
	parent := uuid.Nil
	if k.parent != nil {
		if m.cluster() == "" {
			return nil, usageErrorf("%s: a node pool needs its cluster: --cluster, or cluster in the file", m.source)
		}
		var err error
		if parent, _, err = c.parent(ctx, k, m.cluster()); err != nil {
			return nil, err
		}
	} else if m.Cluster != "" {
		return nil, usageErrorf("%s: only node pools name a cluster", m.source)
	}
	body := createBody{Name: m.Name, Labels: m.presentLabels(), Spec: m.Spec}
	return c.send(ctx, func(ctx context.Context, gen api.ClientInterface, r io.Reader) (*http.Response, error) {
		return k.ops.create(ctx, gen, parent, r)
	}, body)
}

type applyOptions struct {
	output  *outputFlag
	files   []string
	cluster string
}

const applyLong = `Makes resources match files: each document is created if no live resource of its kind has its name,
and otherwise its spec and labels are merged into the resource (a JSON merge patch: members the file leaves out
stay as they are; null removes one). A resource the file already matches is reported unchanged and not touched.

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
func (a *app) applyOne(ctx context.Context, c *client, m *manifest) (*kind, *object, string, error) {
	if m.Kind == "" || m.Name == "" {
		return nil, nil, "", usageErrorf("a document needs kind and name")
	}
	k, err := a.kinds.lookup(m.Kind)
	if err != nil {
		return nil, nil, "", err
	}
	if k.parent != nil && m.cluster() == "" {
		return nil, nil, "", usageErrorf("node pool %s needs its cluster: cluster in the document, or --cluster", m.Name)
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
		return nil, nil, "", fmt.Errorf("%s/%s: %w", k.name, m.Name, err)
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

// applyPatch is the smallest merge patch that makes current's spec and labels what merging m into them gives,
// or nil when that changes nothing. Being the smallest, it leaves out what the document repeats unchanged, such
// as the internal spec fields in what get printed, which only an admin may write.
func applyPatch(current *object, m *manifest) (json.RawMessage, error) {
	type state struct {
		Labels any `json:"labels,omitempty"`
		Spec   any `json:"spec,omitempty"`
	}
	have := state{Labels: deref(current.Labels), Spec: deref(current.Spec)}
	want := state{}
	if m.Labels != nil {
		want.Labels = m.Labels
	}
	if m.Spec != nil {
		want.Spec = m.Spec
	}
	haveJSON, err := json.Marshal(have)
	if err != nil {
		return nil, err
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		return nil, err
	}
	merged, err := jsonpatch.MergePatch(haveJSON, wantJSON)
	if err != nil {
		return nil, fmt.Errorf("merge the document: %w", err)
	}
	patch, err := jsonpatch.CreateMergePatch(haveJSON, merged)
	if err != nil {
		return nil, fmt.Errorf("compute the patch: %w", err)
	}
	if string(patch) == "{}" {
		return nil, nil
	}
	return patch, nil
}

// patch sends a merge patch of spec and/or labels, conditional on resource_version ifMatch when it is not nil.
func (c *client) patch(ctx context.Context, k *kind, r ref, ifMatch *int64, patch json.RawMessage) (*object, error) {
	var params api.PatchClusterParams
	if ifMatch != nil {
		params.IfMatch = ptr(fmt.Sprintf("%q", fmt.Sprint(*ifMatch)))
	}
	return c.send(ctx, func(ctx context.Context, gen api.ClientInterface, body io.Reader) (*http.Response, error) {
		return k.ops.patch(ctx, gen, r, params, body)
	}, patch)
}
