package resource

import "context"

// DefaultTenant is the tenant of every resource while tenancy is off, of resources that existed before it was
// turned on (the migration backfills it), and of callers whose token names no tenant.
const DefaultTenant = "default"

// Caller is who makes a request, as authentication established it.
type Caller struct {
	Name  string
	Admin bool // admins may write internal spec fields
	// Tenant is the caller's tenant: the one its new resources belong to and, unless AllTenants, the only one whose
	// resources it sees. Empty sees nothing.
	Tenant string
	// AllTenants lets the caller see and change every tenant's resources: admins, adapters and the API's own
	// background work. It is only ever set explicitly; the zero Caller is confined to the empty tenant.
	AllTenants bool
}

// SystemCaller is the API's own background work (re-aggregation at start-up): every tenant, as admin.
func SystemCaller() Caller {
	return Caller{Name: "hyperfleet-api", Admin: true, Tenant: DefaultTenant, AllTenants: true}
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller in ctx; without one it is an anonymous non-admin of no tenant, so that a missing
// authentication layer can never grant admin rights, or another tenant's resources, by accident.
func CallerFrom(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	return Caller{Name: "anonymous"}
}

// NewTenant returns the tenant a resource the caller creates belongs to: the caller's, or DefaultTenant for a
// caller with none (an admin or adapter whose token names no tenant).
func (c Caller) NewTenant() string {
	if c.Tenant == "" {
		return DefaultTenant
	}
	return c.Tenant
}
