package resource

import (
	"context"
	"fmt"
	"time"
	"unicode"
)

// The quota names (QuotaRule.Name) a tenant can be limited by; each is a member of Quotas and Usage.
const (
	QuotaClusters        = "clusters"
	QuotaNodePoolDevices = "nodepool_devices"
)

// MaxTenantLength bounds a tenant id, as a token's tenant claim gives it (auth.MaxTenantLength is this bound).
const MaxTenantLength = 128

// Quotas are a tenant's limits; nil is no limit.
type Quotas struct {
	Clusters        *int64
	NodePoolDevices *int64
}

// Usage is what a tenant's live resources (not deleting) use of each quota: its clusters, and the sum of its node
// pools' replicas.
type Usage struct {
	Clusters        int64
	NodePoolDevices int64
}

// Tenant is a tenant's quotas and what it uses of them. A tenant exists as soon as a token names it; one whose
// quotas no admin has set has no row, no limits and no times.
type Tenant struct {
	ID     string
	Quotas Quotas
	Usage  Usage
	// CreatedTime, UpdatedTime and UpdatedBy are of the quotas' row: nil and empty until an admin first sets them.
	CreatedTime *time.Time
	UpdatedTime *time.Time
	UpdatedBy   string
}

// TenantStore reads and writes tenants' quotas with their usage, which it computes from the live resources of
// quotaKinds (the kinds with a Quota) in the same statement as the read.
type TenantStore interface {
	// GetTenant returns the tenant id, with no quotas when it has no row.
	GetTenant(ctx context.Context, quotaKinds []*Descriptor, id string) (*Tenant, error)
	// ListTenants returns up to limit tenants in id order after the id after (empty: from the start): those with
	// a row and those with live resources of quotaKinds.
	ListTenants(ctx context.Context, quotaKinds []*Descriptor, after string, limit int) ([]Tenant, error)
	// PutTenant sets the tenant's quotas, creating its row if need be, and returns the tenant as stored.
	PutTenant(ctx context.Context, quotaKinds []*Descriptor, id string, q Quotas, by string, at time.Time) (*Tenant, error)
}

// Tenants applies the API's rules to tenants: who may see and set which tenant's quotas.
type Tenants struct {
	store      TenantStore
	quotaKinds []*Descriptor
	now        func() time.Time
}

// NewTenants returns the tenants service over store; usage counts the kinds among kinds that have a Quota.
func NewTenants(store TenantStore, kinds []*Descriptor) *Tenants {
	var quotaKinds []*Descriptor
	for _, k := range kinds {
		if k.Quota != nil {
			quotaKinds = append(quotaKinds, k)
		}
	}
	return &Tenants{store: store, quotaKinds: quotaKinds, now: func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }}
}

// CheckTenantID returns a CodeInvalid error unless id is a tenant id: 1 to MaxTenantLength bytes of printable text,
// what a token's tenant claim may name.
func CheckTenantID(id string) error {
	if msg := tenantIDProblem(id); msg != "" {
		return &Error{Code: CodeInvalid, Message: "the tenant id " + msg, Fields: []FieldError{{Field: "tenant", Message: msg}}}
	}
	return nil
}

// tenantIDProblem says what is wrong with id as a tenant id, or "".
func tenantIDProblem(id string) string {
	switch {
	case id == "":
		return "must not be empty"
	case len(id) > MaxTenantLength:
		return fmt.Sprintf("must be at most %d bytes", MaxTenantLength)
	}
	for _, c := range id {
		if !unicode.IsPrint(c) {
			return "must be printable text"
		}
	}
	return ""
}

// Get returns tenant id's quotas and usage. A caller confined to a tenant may read only its own: any other is
// CodeNotFound, as another tenant's resources are, so that tenants cannot learn of each other.
func (t *Tenants) Get(ctx context.Context, id string) (*Tenant, error) {
	c := CallerFrom(ctx)
	if tenantIDProblem(id) != "" || (!c.AllTenants && id != c.Tenant) {
		return nil, Errorf(CodeNotFound, "no tenant %q", id)
	}
	return t.store.GetTenant(ctx, t.quotaKinds, id)
}

// Own returns the caller's own tenant (Caller.NewTenant: the default tenant for a caller whose token names none).
func (t *Tenants) Own(ctx context.Context) (*Tenant, error) {
	id := CallerFrom(ctx).NewTenant()
	if err := CheckTenantID(id); err != nil {
		return nil, err
	}
	return t.store.GetTenant(ctx, t.quotaKinds, id)
}

// List returns up to limit tenants in id order after the id after, and whether there are more. Only callers who
// see every tenant may list them (CodeForbidden).
func (t *Tenants) List(ctx context.Context, after string, limit int) ([]Tenant, bool, error) {
	if !CallerFrom(ctx).AllTenants {
		return nil, false, Errorf(CodeForbidden, "listing tenants requires a caller who sees every tenant (role admin)")
	}
	out, err := t.store.ListTenants(ctx, t.quotaKinds, after, limit+1)
	if err != nil {
		return nil, false, err
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// Put sets tenant id's quotas, replacing both: a nil quota is no limit. Only admins may (CodeForbidden). A quota
// below what the tenant already uses is allowed: it refuses new use (creates, and node pools growing) and takes
// nothing away.
func (t *Tenants) Put(ctx context.Context, id string, q Quotas) (*Tenant, error) {
	c := CallerFrom(ctx)
	if !c.Admin || !c.AllTenants {
		return nil, Errorf(CodeForbidden, "setting a tenant's quotas requires role admin")
	}
	var problems []FieldError
	if msg := tenantIDProblem(id); msg != "" {
		problems = append(problems, FieldError{Field: "tenant", Message: msg})
	}
	for _, f := range []struct {
		name  string
		value *int64
	}{{QuotaClusters, q.Clusters}, {QuotaNodePoolDevices, q.NodePoolDevices}} {
		if f.value != nil && *f.value < 0 {
			problems = append(problems, FieldError{Field: "quotas." + f.name, Message: "must be at least 0, or null for no limit"})
		}
	}
	if len(problems) > 0 {
		return nil, &Error{Code: CodeInvalid, Message: "the tenant's quotas are not valid", Fields: problems}
	}
	return t.store.PutTenant(ctx, t.quotaKinds, id, q, c.Name, t.now())
}
