package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/kinds"
	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// tenantsFixture is a store with tenancy on, a version stream, and the services over it.
type tenantsFixture struct {
	set     *kinds.Set
	svc     *resource.Service
	tenants *resource.Tenants
}

func newTenantsFixture(tb testing.TB) *tenantsFixture {
	tb.Helper()
	set := kindsRequiring(tb, nil)
	store := postgres.NewStore(harness.OpenGorm(tb, harness.NewDatabase(tb)), set.All)
	store.EnableTenancy()
	f := &tenantsFixture{set: set, svc: resource.NewService(store, set.All), tenants: resource.NewTenants(store, set.All)}
	_, err := f.svc.Create(tenantsAdmin(), set.VersionStream, "", resource.CreateInput{Name: "stable-4-16", Spec: json.RawMessage(`{"target_version":"4.16"}`)})
	require.NoError(tb, err)
	return f
}

func tenantsAdmin() context.Context {
	return resource.WithCaller(context.Background(), resource.Caller{Name: "admin", Admin: true, AllTenants: true})
}

func tenantsUser(tenant string) context.Context {
	return resource.WithCaller(context.Background(), resource.Caller{Name: "user-of-" + tenant, Tenant: tenant})
}

// cluster creates a cluster as a user of tenant, with a node pool of each of replicas.
func (f *tenantsFixture) cluster(tb testing.TB, tenant, name string, replicas ...int) *resource.Resource {
	tb.Helper()
	ctx := tenantsUser(tenant)
	c, err := f.svc.Create(ctx, f.set.Cluster, "", resource.CreateInput{Name: name,
		Spec: json.RawMessage(`{"version_stream":"stable-4-16","hosted_cluster":{"dns":{"base_domain":"example.com"}}}`)})
	require.NoError(tb, err)
	for i, n := range replicas {
		_, err := f.svc.Create(ctx, f.set.NodePool, c.ID, resource.CreateInput{Name: fmt.Sprintf("pool-%d", i),
			Spec: json.RawMessage(fmt.Sprintf(`{"replicas":%d,"platform":{"hivelocity":{"device_type":"s1.small","region":"LAX2"}}}`, n))})
		require.NoError(tb, err)
	}
	return c
}

func quota(n int64) *int64 { return &n }

// Usage counts live clusters and the replicas of live node pools, per tenant, with and without a quotas row; a
// quota below the use is stored (it only refuses new use); the list pages in id order over tenants with a row or
// with resources.
func TestTenantsStoreUsageAndQuotas(t *testing.T) {
	f := newTenantsFixture(t)
	f.cluster(t, "acme", "acme-1", 3, 2)
	gone := f.cluster(t, "acme", "acme-2", 4)
	f.cluster(t, "beta", "beta-1")
	_, err := f.svc.Delete(tenantsAdmin(), f.set.Cluster, "", gone.ID)
	require.NoError(t, err)

	got, err := f.tenants.Get(tenantsAdmin(), "acme")
	require.NoError(t, err)
	require.Equal(t, resource.Tenant{ID: "acme", Usage: resource.Usage{Clusters: 1, NodePoolDevices: 5}}, *got, "no row: no quotas, no times")

	before := time.Now().Add(-time.Second)
	put, err := f.tenants.Put(tenantsAdmin(), "acme", resource.Quotas{Clusters: quota(0), NodePoolDevices: quota(30)})
	require.NoError(t, err)
	require.Equal(t, resource.Quotas{Clusters: quota(0), NodePoolDevices: quota(30)}, put.Quotas, "a quota below the use is stored")
	require.Equal(t, resource.Usage{Clusters: 1, NodePoolDevices: 5}, put.Usage)
	require.Equal(t, "admin", put.UpdatedBy)
	require.NotNil(t, put.CreatedTime)
	require.True(t, put.CreatedTime.After(before))
	created := *put.CreatedTime

	put, err = f.tenants.Put(tenantsAdmin(), "acme", resource.Quotas{Clusters: quota(5)})
	require.NoError(t, err)
	require.Equal(t, resource.Quotas{Clusters: quota(5)}, put.Quotas, "PUT replaces both quotas")
	require.Equal(t, created, *put.CreatedTime, "the second PUT updates the row")

	got, err = f.tenants.Get(tenantsUser("acme"), "acme")
	require.NoError(t, err, "a confined caller reads its own tenant")
	require.Equal(t, put, got)

	_, err = f.tenants.Put(tenantsAdmin(), "zeta", resource.Quotas{})
	require.NoError(t, err)

	var ids []string
	after := ""
	for range 10 {
		page, more, err := f.tenants.List(tenantsAdmin(), after, 2)
		require.NoError(t, err)
		for _, tn := range page {
			ids = append(ids, tn.ID)
			after = tn.ID
		}
		if !more {
			break
		}
	}
	// The version stream is the default tenant's, but streams have no quota: only quota kinds make a tenant listed.
	require.Equal(t, []string{"acme", "beta", "zeta"}, ids, "tenants with a row or with live clusters or node pools")
}

// A confined caller sees only its own tenant (another is not found, as another tenant's resources are), cannot
// list or set quotas; bad ids and negative quotas are refused.
func TestTenantsServiceRules(t *testing.T) {
	f := newTenantsFixture(t)
	f.cluster(t, "acme", "acme-1")
	tests := []struct {
		name string
		run  func() error
		want resource.Code
	}{
		{"another tenant", func() error { _, err := f.tenants.Get(tenantsUser("beta"), "acme"); return err }, resource.CodeNotFound},
		{"list as a user", func() error { _, _, err := f.tenants.List(tenantsUser("acme"), "", 10); return err }, resource.CodeForbidden},
		{"put as a user", func() error { _, err := f.tenants.Put(tenantsUser("acme"), "acme", resource.Quotas{}); return err }, resource.CodeForbidden},
		{"put an empty id", func() error { _, err := f.tenants.Put(tenantsAdmin(), "", resource.Quotas{}); return err }, resource.CodeInvalid},
		{"put a control character", func() error { _, err := f.tenants.Put(tenantsAdmin(), "a\x00b", resource.Quotas{}); return err }, resource.CodeInvalid},
		{"put a negative quota", func() error {
			_, err := f.tenants.Put(tenantsAdmin(), "acme", resource.Quotas{NodePoolDevices: quota(-1)})
			return err
		}, resource.CodeInvalid},
		{"get an over-long id", func() error {
			_, err := f.tenants.Get(tenantsAdmin(), string(make([]byte, resource.MaxTenantLength+1)))
			return err
		}, resource.CodeNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			require.Error(t, err)
			require.Equal(t, tt.want, resource.ErrorCode(err), "%v", err)
		})
	}
	own, err := f.tenants.Own(tenantsUser("acme"))
	require.NoError(t, err)
	require.Equal(t, resource.Usage{Clusters: 1}, own.Usage)
}
