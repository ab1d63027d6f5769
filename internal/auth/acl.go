package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

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
}

// aclFile is the file's shape; KnownFields rejects any other section.
type aclFile struct {
	Users    map[string][]string `yaml:"users"`
	Adapters map[string]string   `yaml:"adapters"`
	Admins   []string            `yaml:"admins"`
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
	for identity, name := range f.Adapters {
		if identity == "" {
			return nil, errors.New("adapters: empty identity")
		}
		if !isDNSLabel(name) {
			return nil, fmt.Errorf("adapters: %s: adapter name %q is not a DNS label (lowercase letters, digits and '-', at most 63)", identity, name)
		}
		add(identity, RoleAdapter)
		g := grants[identity]
		g.adapter = name
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

// Apply returns id with its roles and adapter name replaced by what the ACL grants id.Subject: the ACL is
// authoritative, so roles and adapter claims in the token are dropped, and an identity the ACL does not name is
// returned with no roles and no adapter. id.Subject is kept. The returned Roles never aliases the ACL's.
func (a *ACL) Apply(id Identity) Identity {
	g := a.grants[id.Subject]
	return Identity{Subject: id.Subject, Roles: slices.Clone(g.roles), Adapter: g.adapter}
}
