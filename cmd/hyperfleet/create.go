package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// createBody is the body of every kind's create. The API decodes it strictly against the kind's schema (an
// unknown member is 400 HYPERFLEET-VAL-001), so the spec is passed through as written rather than through the
// generated types, which would drop what they do not know instead of letting the API say what is wrong.
type createBody struct {
	Name               string            `json:"name"`
	Labels             map[string]string `json:"labels,omitempty"`
	Spec               json.RawMessage   `json:"spec"`
	DeletionProtection bool              `json:"deletion_protection,omitempty"`
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
	m := &manifest{Kind: k.Singular, Cluster: o.cluster, source: "the command line"}
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
			if fk, err := a.lookupKind(m.Kind); err != nil || fk != k {
				return usageErrorf("%s is a %s, not a %s", m.source, m.Kind, k.Singular)
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
func (c *client) create(ctx context.Context, k *api.Kind, m *manifest) (*object, error) {
	if len(m.Spec) == 0 {
		return nil, usageErrorf("%s: %s/%s has no spec", m.source, k.Singular, m.Name)
	}
	parent := uuid.Nil
	if k.Parent != nil {
		if m.cluster() == "" {
			return nil, usageErrorf("%s: a %s needs its %s: --%[3]s, or %[3]s in the file", m.source, k.Singular, k.Parent.Singular)
		}
		var err error
		if parent, _, err = c.parent(ctx, k, m.cluster()); err != nil {
			return nil, err
		}
	} else if m.Cluster != "" {
		return nil, usageErrorf("%s: a %s has no cluster", m.source, k.Singular)
	}
	body := createBody{Name: m.Name, Labels: m.presentLabels(), Spec: m.Spec, DeletionProtection: m.DeletionProtection != nil && *m.DeletionProtection}
	return c.send(func(r io.Reader) (*http.Response, error) {
		return c.gen.CreateResourceWithBody(ctx, k, parent, contentJSON, r)
	}, body)
}

const (
	contentJSON       = "application/json"
	contentMergePatch = "application/merge-patch+json"
)
