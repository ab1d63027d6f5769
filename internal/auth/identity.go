package auth

import (
	"fmt"
	"slices"
)

// Role is a named set of permissions; see the package documentation for what each may do.
type Role string

// The roles. Their string values appear in tokens and ACL files, so they never change.
const (
	RoleViewer  Role = "viewer"
	RoleUser    Role = "user"
	RoleAdapter Role = "adapter"
	RoleAdmin   Role = "admin"
	// RolePlatform writes the platform objects that every cluster shares (VersionStreams, UpgradeSchedules): what
	// a platform team holds without being admin of everything.
	RolePlatform Role = "platform"
)

// Roles returns every role, in the order messages list them.
func Roles() []Role { return []Role{RoleViewer, RoleUser, RolePlatform, RoleAdapter, RoleAdmin} }

// known reports whether r is one of the roles.
func (r Role) known() bool {
	return slices.Contains(Roles(), r)
}

// ParseRole returns s as a Role, or an error naming the valid roles.
func ParseRole(s string) (Role, error) { return parseRole(s) }

// parseRole returns s as a Role, or an error naming the valid roles.
func parseRole(s string) (Role, error) {
	if r := Role(s); r.known() {
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q: want one of viewer, user, platform, adapter, admin", s)
}

// Identity is an authenticated caller.
type Identity struct {
	// Subject is the value of the identity claim: who the caller is, as logged and as matched by an ACL.
	Subject string
	// Roles the caller holds, without duplicates.
	Roles []Role
	// Adapter is the adapter name the caller may report statuses as; meaningful only with RoleAdapter, and empty when
	// none was granted, in which case the caller can report as no adapter at all.
	Adapter string
	// Kinds are the kinds (names or plurals, lower case) an ACL file lists for the adapter beyond the kinds that
	// require it: an adapter reports only on those two sets (AuthorizeReportKind).
	Kinds []string
	// Tenant is the caller's tenant, from the token's tenant claim (VerifierConfig.TenantClaim); empty when tenancy
	// is off or the token names none.
	Tenant string
}

// HasRole reports whether id holds r.
func (id Identity) HasRole(r Role) bool {
	return slices.Contains(id.Roles, r)
}

// isDNSLabel reports whether s is an RFC 1123 label, the form the API requires of adapter names.
func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
