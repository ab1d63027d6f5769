package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// manifest is one resource in a file that apply and create --from-file read:
//
//	kind: cluster            # any name of the kind: Cluster, clusters, cl
//	name: demo
//	cluster: demo            # node pools only: the cluster's name or id
//	labels: {env: dev}
//	spec: {version_stream: stable-4-16}
//
// A resource as `get -o yaml` prints it is accepted too, so that it can be edited and applied back: the members
// the API sets are ignored, and owner_references names a node pool's cluster.
type manifest struct {
	Kind    string             `json:"kind"`
	Name    string             `json:"name"`
	Cluster string             `json:"cluster,omitempty"`
	Labels  map[string]*string `json:"labels,omitempty"`
	Spec    json.RawMessage    `json:"spec,omitempty"`
	// DeletionProtection, when given, is applied: true makes deletes fail until it is cleared.
	DeletionProtection *bool `json:"deletion_protection,omitempty"`

	OwnerReferences *api.ObjectReference `json:"owner_references,omitempty"`
	// Set by the API; accepted and ignored.
	ID         json.RawMessage `json:"id,omitempty"`
	Href       json.RawMessage `json:"href,omitempty"`
	Generation json.RawMessage `json:"generation,omitempty"`
	// A printed resource_version is ignored rather than used as If-Match: adapters' reports move it all the
	// time, so an edited document would nearly always be refused.
	ResourceVersion json.RawMessage `json:"resource_version,omitempty"`
	Status          json.RawMessage `json:"status,omitempty"`
	CreatedTime     json.RawMessage `json:"created_time,omitempty"`
	UpdatedTime     json.RawMessage `json:"updated_time,omitempty"`
	CreatedBy       json.RawMessage `json:"created_by,omitempty"`
	UpdatedBy       json.RawMessage `json:"updated_by,omitempty"`
	DeletedTime     json.RawMessage `json:"deleted_time,omitempty"`
	DeletedBy       json.RawMessage `json:"deleted_by,omitempty"`
	// The tenant comes from the caller's token, never from a document.
	Tenant json.RawMessage `json:"tenant,omitempty"`

	// source says where the manifest came from, for messages: "demo.yaml, document 2".
	source string
}

// cluster is the node pool's cluster the manifest names, if any.
func (m *manifest) cluster() string {
	if m.Cluster == "" && m.OwnerReferences != nil {
		return m.OwnerReferences.Id.String()
	}
	return m.Cluster
}

// presentLabels are the labels without the nulls that only a patch can use (to remove a label).
func (m *manifest) presentLabels() map[string]string {
	out := map[string]string{}
	for k, v := range m.Labels {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

// documentSeparator is YAML's "---" line between documents.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// readInput reads a file, or stdin for "-".
func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		raw, err := io.ReadAll(io.LimitReader(stdin, maxAnswer))
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		return raw, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return raw, nil
}

// readManifests reads the YAML or JSON documents of a file ("-": stdin), separated by "---" lines; empty
// documents are skipped.
func readManifests(path string, stdin io.Reader) ([]*manifest, error) {
	raw, err := readInput(path, stdin)
	if err != nil {
		return nil, err
	}
	name := path
	if path == "-" {
		name = "stdin"
	}
	var out []*manifest
	for i, chunk := range documentSeparator.Split(string(raw), -1) {
		doc, err := yaml.YAMLToJSON([]byte(chunk))
		if err != nil {
			return nil, usageErrorf("%s, document %d: %v", name, i+1, err)
		}
		if bytes.Equal(bytes.TrimSpace(doc), []byte("null")) {
			continue // blank, or comments only
		}
		m := &manifest{source: fmt.Sprintf("%s, document %d", name, i+1)}
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.DisallowUnknownFields()
		if err := dec.Decode(m); err != nil {
			return nil, usageErrorf("%s: %v (a document has kind, name, labels, spec and, for a node pool, cluster)", m.source, err)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, usageErrorf("%s holds no document", name)
	}
	return out, nil
}

// readObject reads a JSON object written as JSON or YAML, inline (a flag's value) or from a file ("-": stdin).
func readObject(what, inline, path string, stdin io.Reader) (json.RawMessage, error) {
	raw := []byte(inline)
	if path != "" {
		var err error
		if raw, err = readInput(path, stdin); err != nil {
			return nil, err
		}
	}
	doc, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, usageErrorf("%s: %v", what, err)
	}
	if trimmed := bytes.TrimSpace(doc); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, usageErrorf("%s: want a JSON or YAML object, got %s", what, strings.TrimSpace(string(doc)))
	}
	return doc, nil
}

// parseLabels reads "k=v,k2=v2" (create) or, with removals allowed, also "k-" (patch: remove k).
func parseLabels(s string, removals bool) (map[string]*string, error) {
	out := map[string]*string{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if key, ok := strings.CutSuffix(item, "-"); ok && removals && !strings.Contains(item, "=") {
			out[key] = nil
			continue
		}
		key, value, ok := strings.Cut(item, "=")
		if !ok || key == "" {
			want := "key=value"
			if removals {
				want += " or key- (to remove it)"
			}
			return nil, usageErrorf("--labels %q: want %s, comma-separated", item, want)
		}
		out[key] = ptr(value)
	}
	return out, nil
}
