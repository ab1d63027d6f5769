package auth

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

func TestAuthorize(t *testing.T) {
	const own = "dns"
	callers := map[string]Identity{
		"nobody":                     {Subject: "n"},
		"viewer":                     {Subject: "v", Roles: []Role{RoleViewer}},
		"user":                       {Subject: "u", Roles: []Role{RoleUser}},
		"adapter":                    {Subject: "a", Roles: []Role{RoleAdapter}, Adapter: own},
		"admin":                      {Subject: "r", Roles: []Role{RoleAdmin}},
		"platform":                   {Subject: "p", Roles: []Role{RolePlatform}},
		"viewer+user":                {Subject: "vu", Roles: []Role{RoleViewer, RoleUser}},
		"adapter no name":            {Subject: "a2", Roles: []Role{RoleAdapter}},
		"adapter claim without role": {Subject: "x", Adapter: own},
	}
	// ok: "" means allowed; otherwise a part of the 403 message.
	tests := []struct {
		caller  string
		action  Action
		adapter string
		ok      string
	}{
		{caller: "nobody", action: ActionRead, ok: "reading requires role viewer, user, platform, adapter or admin"},
		{caller: "nobody", action: ActionWriteResource, ok: "requires role user or admin"},
		{caller: "nobody", action: ActionWriteInternalFields, ok: "requires role admin"},
		{caller: "nobody", action: ActionWriteStatus, adapter: own, ok: "requires role adapter"},
		{caller: "nobody", action: ActionForceDelete, ok: "requires role admin"},

		{caller: "viewer", action: ActionRead},
		{caller: "viewer", action: ActionWriteResource, ok: "requires role user or admin"},
		{caller: "viewer", action: ActionWriteInternalFields, ok: "requires role admin"},
		{caller: "viewer", action: ActionWriteStatus, adapter: own, ok: "requires role adapter"},
		{caller: "viewer", action: ActionForceDelete, ok: "requires role admin"},

		{caller: "user", action: ActionRead},
		{caller: "user", action: ActionWriteResource},
		{caller: "user", action: ActionWriteInternalFields, ok: "requires role admin"},
		{caller: "user", action: ActionWriteStatus, adapter: own, ok: "requires role adapter"},
		{caller: "user", action: ActionForceDelete, ok: "requires role admin"},

		{caller: "adapter", action: ActionRead},
		{caller: "adapter", action: ActionWriteResource, ok: "requires role user or admin"},
		{caller: "adapter", action: ActionWriteInternalFields, ok: "requires role admin"},
		{caller: "adapter", action: ActionWriteStatus, adapter: own},
		{caller: "adapter", action: ActionWriteStatus, adapter: "hostedcluster-applier", ok: `only as adapter "dns", not as "hostedcluster-applier"`},
		{caller: "adapter", action: ActionWriteStatus, adapter: "", ok: `only as adapter "dns"`},
		{caller: "adapter", action: ActionWriteStatus, adapter: AnyAdapter},
		{caller: "viewer", action: ActionWriteStatus, adapter: AnyAdapter, ok: "requires role adapter"},
		{caller: "user", action: ActionWriteStatus, adapter: AnyAdapter, ok: "requires role adapter"},
		{caller: "adapter no name", action: ActionWriteStatus, adapter: AnyAdapter, ok: "with an adapter name"},
		{caller: "admin", action: ActionWriteStatus, adapter: AnyAdapter},
		{caller: "adapter", action: ActionForceDelete, ok: "requires role admin"},

		{caller: "admin", action: ActionRead},
		{caller: "admin", action: ActionWriteResource},
		{caller: "admin", action: ActionWriteInternalFields},
		{caller: "admin", action: ActionWriteStatus, adapter: own},
		{caller: "admin", action: ActionWriteStatus, adapter: "anyone"},
		{caller: "admin", action: ActionForceDelete},

		{caller: "nobody", action: ActionWritePlatform, ok: "requires role platform or admin"},
		{caller: "viewer", action: ActionWritePlatform, ok: "requires role platform or admin"},
		{caller: "user", action: ActionWritePlatform, ok: "platform objects (version streams, upgrade schedules) requires role platform or admin"},
		{caller: "adapter", action: ActionWritePlatform, ok: "requires role platform or admin"},
		{caller: "platform", action: ActionWritePlatform},
		{caller: "admin", action: ActionWritePlatform},
		{caller: "platform", action: ActionRead},
		{caller: "platform", action: ActionWriteResource, ok: "requires role user or admin"},
		{caller: "platform", action: ActionWriteInternalFields, ok: "requires role admin"},
		{caller: "platform", action: ActionWriteStatus, adapter: AnyAdapter, ok: "requires role adapter"},
		{caller: "platform", action: ActionForceDelete, ok: "requires role admin"},
		{caller: "platform", action: ActionForceTransition, ok: "requires role admin"},
		{caller: "user", action: ActionForceTransition, ok: "requires role admin"},
		{caller: "admin", action: ActionForceTransition},
		{caller: "user", action: ActionAdminTenants, ok: "quotas requires role admin"},
		{caller: "adapter", action: ActionAdminTenants, ok: "requires role admin"},
		{caller: "admin", action: ActionAdminTenants},

		{caller: "viewer+user", action: ActionWriteResource},
		{caller: "viewer+user", action: ActionWriteStatus, adapter: own, ok: "requires role adapter"},
		{caller: "adapter no name", action: ActionRead},
		{caller: "adapter no name", action: ActionWriteStatus, adapter: "", ok: "none was granted"},
		{caller: "adapter claim without role", action: ActionWriteStatus, adapter: own, ok: "requires role adapter"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%s", tt.caller, tt.action, tt.adapter), func(t *testing.T) {
			id, ok := callers[tt.caller]
			require.True(t, ok, "unknown caller %q", tt.caller)
			err := Authorize(id, tt.action, tt.adapter)
			if tt.ok == "" {
				require.NoError(t, err)
				return
			}
			requireCode(t, err, resource.CodeForbidden, tt.ok)
		})
	}
}

func TestAuthorizeUnknownActionIsInternal(t *testing.T) {
	for _, id := range []Identity{{Subject: "r", Roles: []Role{RoleAdmin}}, {Subject: "v", Roles: []Role{RoleViewer}}} {
		err := Authorize(id, Action(0), "")
		require.Error(t, err)
		require.Equal(t, resource.CodeInternal, resource.ErrorCode(err), "a programming error, not a 403")
	}
}

func TestAuthorizeReportKind(t *testing.T) {
	required := []string{"hostedcluster-applier"}
	tests := []struct {
		name string
		id   Identity
		ok   bool
	}{
		{name: "required adapter", id: Identity{Subject: "a", Roles: []Role{RoleAdapter}, Adapter: "hostedcluster-applier"}, ok: true},
		{name: "another adapter", id: Identity{Subject: "a", Roles: []Role{RoleAdapter}, Adapter: "dns"}},
		{name: "another adapter listed for the kind", id: Identity{Subject: "a", Roles: []Role{RoleAdapter}, Adapter: "dns", Kinds: []string{"cluster"}}, ok: true},
		{name: "listed by plural", id: Identity{Subject: "a", Roles: []Role{RoleAdapter}, Adapter: "dns", Kinds: []string{"clusters"}}, ok: true},
		{name: "listed for another kind", id: Identity{Subject: "a", Roles: []Role{RoleAdapter}, Adapter: "dns", Kinds: []string{"nodepool"}}},
		{name: "no adapter name", id: Identity{Subject: "a", Roles: []Role{RoleAdapter}}},
		{name: "admin", id: Identity{Subject: "r", Roles: []Role{RoleAdmin}}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := AuthorizeReportKind(tt.id, "Cluster", "clusters", required)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			requireCode(t, err, resource.CodeForbidden, "may report only on kinds that require it or that the ACL file lists for it, and Cluster is neither")
		})
	}
}
