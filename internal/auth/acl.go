package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ACL grants roles, and adapter names, by identity. It is loaded from a file (format in the package documentation)
// and is read-only afterwards, so one ACL may serve concurrent requests.
type ACL struct {
	grants map[string]grant
}

type grant struct {
	roles   []Role
	adapter string
	kinds   []string
}

// aclFile is the file's shape; KnownFields rejects any other section.
type aclFile struct {
	Users    map[string][]string     `yaml:"users"`
	Adapters map[string]adapterGrant `yaml:"adapters"`
	Admins   []string                `yaml:"admins"`
}

// adapterGrant is an adapters entry: the adapter name alone (`svc: dns`), or the name and the kinds it may report
// on beyond those that require it (`svc: {adapter: dns, kinds: [cluster]}`).
type adapterGrant struct {
	Name  string
	Kinds []string
}

// UnmarshalYAML reads either form. The mapping's keys are checked here because a nested decode does not inherit
// the file decoder's KnownFields.
func (g *adapterGrant) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&g.Name)
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: an adapters entry is an adapter name or {adapter: <name>, kinds: [<kind>, …]}", n.Line)
	}
	for i := 0; i < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k != "adapter" && k != "kinds" {
			return fmt.Errorf("line %d: field %s not found in an adapters entry (adapter, kinds)", n.Content[i].Line, k)
		}
	}
	var full struct {
		Adapter string   `yaml:"adapter"`
		Kinds   []string `yaml:"kinds"`
	}
	if err := n.Decode(&full); err != nil {
		return err
	}
	g.Name, g.Kinds = full.Adapter, full.Kinds
	return nil
}

// LoadACL reads and validates the ACL file at path, YAML or JSON. It returns an error, naming the offending entry,
// if the file cannot be read or parsed, has unknown sections, names an unknown role, grants role adapter under
// users, lists an identity twice within a section, or has an empty identity or an adapter name that is not a DNS
// label. An empty file is a valid ACL that grants nothing.
func LoadACL(path string) (*ACL, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read ACL file: %w", err)
	}
	var f aclFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse ACL file %s: %w", path, err)
	}
	acl, err := newACL(f)
	if err != nil {
		return nil, fmt.Errorf("ACL file %s: %w", path, err)
	}
	return acl, nil
}

func newACL(f aclFile) (*ACL, error) {
	grants := map[string]grant{}
	add := func(identity string, r Role) {
		g := grants[identity]
		if !slices.Contains(g.roles, r) {
			g.roles = append(g.roles, r)
		}
		grants[identity] = g
	}
	for identity, roles := range f.Users {
		if identity == "" {
			return nil, errors.New("users: empty identity")
		}
		for _, s := range roles {
			r, err := parseRole(s)
			if err != nil {
				return nil, fmt.Errorf("users: %s: %w", identity, err)
			}
			if r == RoleAdapter {
				// An adapter role without a name could not report as anything; say where it belongs.
				return nil, fmt.Errorf("users: %s: role adapter is granted under adapters, which also names the adapter", identity)
			}
			add(identity, r)
		}
	}
	for identity, entry := range f.Adapters {
		if identity == "" {
			return nil, errors.New("adapters: empty identity")
		}
		if !isDNSLabel(entry.Name) {
			return nil, fmt.Errorf("adapters: %s: adapter name %q is not a DNS label (lowercase letters, digits and '-', at most 63)", identity, entry.Name)
		}
		add(identity, RoleAdapter)
		g := grants[identity]
		g.adapter = entry.Name
		for _, k := range entry.Kinds {
			k = strings.ToLower(strings.TrimSpace(k))
			if !isDNSLabel(k) {
				return nil, fmt.Errorf("adapters: %s: kind %q is not a kind's name (e.g. cluster, nodepools)", identity, k)
			}
			if !slices.Contains(g.kinds, k) {
				g.kinds = append(g.kinds, k)
			}
		}
		grants[identity] = g
	}
	seen := map[string]bool{}
	for _, identity := range f.Admins {
		if identity == "" {
			return nil, errors.New("admins: empty identity")
		}
		if seen[identity] {
			return nil, fmt.Errorf("admins: %s is listed twice", identity)
		}
		seen[identity] = true
		add(identity, RoleAdmin)
	}
	return &ACL{grants: grants}, nil
}

// Apply returns id with its roles, adapter name and listed kinds replaced by what the ACL grants id.Subject: the ACL is
// authoritative, so roles and adapter claims in the token are dropped, and an identity the ACL does not name is
// returned with no roles and no adapter. id.Subject is kept. The returned Roles never aliases the ACL's.
func (a *ACL) Apply(id Identity) Identity {
	g := a.grants[id.Subject]
	return Identity{Subject: id.Subject, Roles: slices.Clone(g.roles), Adapter: g.adapter, Kinds: slices.Clone(g.kinds)}
}
