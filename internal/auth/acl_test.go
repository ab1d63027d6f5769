package auth

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const goodACL = `
users:
  alice@example.com: [user]
  bob: [viewer]
  carol: [viewer, user, viewer]
  root@example.com: [user]
  pat: [platform]
adapters:
  svc-applier: hostedcluster-applier
  svc-dns: dns
  svc-extra: {adapter: extra, kinds: [Cluster, nodepools, cluster]}
admins: [root@example.com]
`

func TestLoadACLAndApply(t *testing.T) {
	formats := map[string]string{
		"acl.yaml": goodACL,
		"acl.json": `{"users": {"alice@example.com": ["user"], "bob": ["viewer"], "carol": ["viewer", "user"], "root@example.com": ["user"], "pat": ["platform"]},
		              "adapters": {"svc-applier": "hostedcluster-applier", "svc-dns": "dns", "svc-extra": {"adapter": "extra", "kinds": ["Cluster", "nodepools", "cluster"]}},
		              "admins": ["root@example.com"]}`,
	}
	tests := []struct {
		name string
		in   Identity
		want Identity
	}{
		{name: "user", in: Identity{Subject: "alice@example.com"}, want: Identity{Subject: "alice@example.com", Roles: []Role{RoleUser}}},
		{name: "viewer", in: Identity{Subject: "bob"}, want: Identity{Subject: "bob", Roles: []Role{RoleViewer}}},
		{name: "platform", in: Identity{Subject: "pat"}, want: Identity{Subject: "pat", Roles: []Role{RolePlatform}}},
		{name: "several roles, deduplicated", in: Identity{Subject: "carol"}, want: Identity{Subject: "carol", Roles: []Role{RoleViewer, RoleUser}}},
		{name: "adapter with its name", in: Identity{Subject: "svc-applier"}, want: Identity{Subject: "svc-applier", Roles: []Role{RoleAdapter}, Adapter: "hostedcluster-applier"}},
		{
			name: "adapter with the kinds listed for it, lower case, deduplicated",
			in:   Identity{Subject: "svc-extra"},
			want: Identity{Subject: "svc-extra", Roles: []Role{RoleAdapter}, Adapter: "extra", Kinds: []string{"cluster", "nodepools"}},
		},
		{name: "union of sections", in: Identity{Subject: "root@example.com"}, want: Identity{Subject: "root@example.com", Roles: []Role{RoleUser, RoleAdmin}}},
		{
			name: "token roles and adapter replaced",
			in:   Identity{Subject: "bob", Roles: []Role{RoleAdmin}, Adapter: "dns"},
			want: Identity{Subject: "bob", Roles: []Role{RoleViewer}},
		},
		{
			name: "unknown identity gets nothing, whatever the token said",
			in:   Identity{Subject: "mallory", Roles: []Role{RoleAdmin, RoleAdapter}, Adapter: "dns"},
			want: Identity{Subject: "mallory"},
		},
		{name: "identities match exactly", in: Identity{Subject: "Alice@example.com"}, want: Identity{Subject: "Alice@example.com"}},
	}
	for file, content := range formats {
		t.Run(file, func(t *testing.T) {
			acl, err := LoadACL(writeFile(t, file, []byte(content)))
			require.NoError(t, err)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					got := acl.Apply(tt.in)
					require.Equal(t, tt.want, got)
				})
			}
		})
	}
}

func TestApplyDoesNotShareRoles(t *testing.T) {
	acl, err := LoadACL(writeFile(t, "acl.yaml", []byte(goodACL)))
	require.NoError(t, err)
	got := acl.Apply(Identity{Subject: "bob"})
	got.Roles[0] = RoleAdmin
	require.Equal(t, []Role{RoleViewer}, acl.Apply(Identity{Subject: "bob"}).Roles)
}

func TestLoadACLErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr string
	}{
		{name: "not YAML", content: "users: [", wantErr: "parse ACL file"},
		{name: "users not a map", content: "users: [alice]", wantErr: "parse ACL file"},
		{name: "unknown section", content: "admin: [root]", wantErr: "field admin not found"},
		{name: "unknown role", content: "users: {alice: [superuser]}", wantErr: `alice: unknown role "superuser"`},
		{name: "adapter role under users", content: "users: {svc: [adapter]}", wantErr: "role adapter is granted under adapters"},
		{name: "adapter name not a DNS label", content: "adapters: {svc: Hosted_Cluster}", wantErr: `adapter name "Hosted_Cluster" is not a DNS label`},
		{name: "empty adapter name", content: `adapters: {svc: ""}`, wantErr: "is not a DNS label"},
		{name: "unknown field in an adapter entry", content: `adapters: {svc: {adapter: dns, kind: [cluster]}}`, wantErr: "field kind not found in an adapters entry"},
		{name: "adapter entry without a name", content: `adapters: {svc: {kinds: [cluster]}}`, wantErr: "is not a DNS label"},
		{name: "adapter entry a list", content: `adapters: {svc: [dns]}`, wantErr: "an adapters entry is an adapter name or"},
		{name: "bad kind", content: `adapters: {svc: {adapter: dns, kinds: ["node pools"]}}`, wantErr: `kind "node pools" is not a kind's name`},
		{name: "duplicate identity", content: "users:\n  alice: [user]\n  alice: [viewer]\n", wantErr: "already defined"},
		{name: "duplicate admin", content: "admins: [root, root]", wantErr: "root is listed twice"},
		{name: "empty identity", content: `admins: [""]`, wantErr: "empty identity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acl, err := LoadACL(writeFile(t, "acl.yaml", []byte(tt.content)))
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, acl)
		})
	}

	t.Run("missing file", func(t *testing.T) {
		_, err := LoadACL(filepath.Join(t.TempDir(), "nope.yaml"))
		require.ErrorContains(t, err, "no such file")
	})
	t.Run("empty file grants nothing", func(t *testing.T) {
		acl, err := LoadACL(writeFile(t, "acl.yaml", nil))
		require.NoError(t, err)
		require.Equal(t, Identity{Subject: "root"}, acl.Apply(Identity{Subject: "root", Roles: []Role{RoleAdmin}}))
	})
}
