package auth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// Action is a class of operation that Authorize decides on. The HTTP edge maps each route to one.
type Action int

// The actions.
const (
	// ActionRead covers every GET: resources, lists, statuses.
	ActionRead Action = iota + 1
	// ActionWriteResource covers creating, patching and (non-forced) deleting resources.
	ActionWriteResource
	// ActionWriteInternalFields is writing spec fields the schema marks internal, on top of ActionWriteResource.
	ActionWriteInternalFields
	// ActionWriteStatus is posting an adapter's status report.
	ActionWriteStatus
	// ActionForceDelete removes a resource without waiting for its adapters to finalize it.
	ActionForceDelete
	// ActionWritePlatform covers creating, patching and (non-forced) deleting platform objects: the resources of a
	// kind every cluster shares (VersionStreams, UpgradeSchedules), whose change rolls every cluster that names them.
	ActionWritePlatform
	// ActionForceTransition is applying a change the kind's transition rules refuse (a VersionStream's minor going
	// backwards or skipping minors), on top of the write itself.
	ActionForceTransition
	// ActionAdminTenants is listing tenants and setting their quotas (reading one's own tenant is ActionRead).
	ActionAdminTenants
)

// String returns the action as it reads in messages and logs.
func (a Action) String() string {
	switch a {
	case ActionRead:
		return "read"
	case ActionWriteResource:
		return "write resources"
	case ActionWriteInternalFields:
		return "write internal fields"
	case ActionWriteStatus:
		return "write statuses"
	case ActionForceDelete:
		return "force-delete"
	case ActionWritePlatform:
		return "write platform objects"
	case ActionForceTransition:
		return "force a transition"
	case ActionAdminTenants:
		return "administer tenants"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// AnyAdapter is the adapter argument that asks Authorize whether id may write the reports of some adapter: what a
// route can check before it reads the body that names the adapter. It is no adapter's name (those are DNS labels).
const AnyAdapter = "*"

// Authorize returns nil if id may perform action, and a *resource.Error with resource.CodeForbidden saying which role
// is needed otherwise. adapter is, for ActionWriteStatus, the adapter the report is for (or AnyAdapter), and is
// ignored for every other action: an adapter may write only reports whose adapter equals its own, non-empty,
// adapter name.
//
// An action that is not one of the constants is a programming error and gets a plain (internal) error, not a 403.
func Authorize(id Identity, action Action, adapter string) error {
	if id.HasRole(RoleAdmin) {
		if action < ActionRead || action > ActionAdminTenants {
			return fmt.Errorf("auth: unknown action %d", int(action))
		}
		return nil
	}
	switch action {
	case ActionRead:
		if id.HasRole(RoleViewer) || id.HasRole(RoleUser) || id.HasRole(RolePlatform) || id.HasRole(RoleAdapter) {
			return nil
		}
		return forbidden("reading requires role viewer, user, platform, adapter or admin")
	case ActionWriteResource:
		if id.HasRole(RoleUser) {
			return nil
		}
		return forbidden("creating, changing or deleting resources requires role user or admin")
	case ActionWriteInternalFields:
		return forbidden("writing internal spec fields requires role admin")
	case ActionWriteStatus:
		if !id.HasRole(RoleAdapter) {
			return forbidden("writing statuses requires role adapter (reporting as that adapter) or admin")
		}
		if id.Adapter == "" {
			return forbidden("writing statuses requires role adapter with an adapter name, and none was granted")
		}
		if adapter != AnyAdapter && id.Adapter != adapter {
			return forbidden(fmt.Sprintf("this caller may write statuses only as adapter %q, not as %q; reporting as another adapter requires role admin",
				id.Adapter, adapter))
		}
		return nil
	case ActionForceDelete:
		return forbidden("force-deleting requires role admin")
	case ActionWritePlatform:
		if id.HasRole(RolePlatform) {
			return nil
		}
		return forbidden("creating, changing or deleting platform objects (version streams, upgrade schedules) requires role platform or admin")
	case ActionForceTransition:
		return forbidden("force=true (a change the kind's rules refuse) requires role admin")
	case ActionAdminTenants:
		return forbidden("listing tenants and setting their quotas requires role admin")
	}
	return fmt.Errorf("auth: unknown action %d", int(action))
}

// AuthorizeReportKind returns nil if id may report statuses on resources of a kind (its name and plural) whose
// required adapters are required, and a *resource.Error with resource.CodeForbidden otherwise. Call it after
// Authorize allowed ActionWriteStatus for the report's adapter. An admin may report on any kind; an adapter only on
// kinds that require its adapter or that the ACL file lists for it, so that a compromised or misconfigured adapter
// cannot write conditions on resources it has no business with.
func AuthorizeReportKind(id Identity, kind, plural string, required []string) error {
	if id.HasRole(RoleAdmin) {
		return nil
	}
	if id.Adapter != "" && slices.Contains(required, id.Adapter) {
		return nil
	}
	for _, k := range id.Kinds {
		if strings.EqualFold(k, kind) || strings.EqualFold(k, plural) {
			return nil
		}
	}
	return forbidden(fmt.Sprintf("adapter %q may report only on kinds that require it or that the ACL file lists for it, and %s is neither",
		id.Adapter, kind))
}

func forbidden(msg string) error {
	return &resource.Error{Code: resource.CodeForbidden, Message: msg}
}
