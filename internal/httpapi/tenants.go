package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// TenantService is what the tenants routes need of the domain (resource.Tenants).
type TenantService interface {
	Get(ctx context.Context, id string) (*resource.Tenant, error)
	Own(ctx context.Context) (*resource.Tenant, error)
	List(ctx context.Context, after string, limit int) ([]resource.Tenant, bool, error)
	Put(ctx context.Context, id string, q resource.Quotas) (*resource.Tenant, error)
}

var _ TenantService = (*resource.Tenants)(nil)

// routeTenants registers the tenants routes on the resource API's router. Listing and setting quotas are the
// admins'; reading one tenant is every reader's, and the domain shows a confined caller only its own.
func (s *Handler) routeTenants(resources *mux.Router) {
	resources.Handle("/tenants", s.allow(auth.ActionAdminTenants, s.listTenants)).Methods(http.MethodGet)
	resources.Handle("/tenants/{tenant}", s.allow(auth.ActionRead, s.getTenant)).Methods(http.MethodGet)
	resources.Handle("/tenants/{tenant}", s.allow(auth.ActionAdminTenants, s.putTenant)).Methods(http.MethodPut)
	resources.Handle("/tenant", s.allow(auth.ActionRead, s.ownTenant)).Methods(http.MethodGet)
}

// tenants returns the tenant service, or the refusal of a handler built without one.
func (s *Handler) tenants() (TenantService, error) {
	if s.cfg.Tenants == nil {
		return nil, resource.Errorf(resource.CodeNotFound, "this server does not serve tenants")
	}
	return s.cfg.Tenants, nil
}

func presentTenant(t *resource.Tenant) api.Tenant {
	out := api.Tenant{Kind: "Tenant", Id: t.ID, Href: BasePath + "/tenants/" + url.PathEscape(t.ID),
		Quotas:      api.TenantQuotas{Clusters: t.Quotas.Clusters, NodepoolDevices: t.Quotas.NodePoolDevices},
		Usage:       api.TenantUsage{Clusters: t.Usage.Clusters, NodepoolDevices: t.Usage.NodePoolDevices},
		CreatedTime: t.CreatedTime, UpdatedTime: t.UpdatedTime}
	if t.UpdatedBy != "" {
		out.UpdatedBy = &t.UpdatedBy
	}
	return out
}

func (s *Handler) getTenant(w http.ResponseWriter, r *http.Request) {
	s.answerTenant(w, r, func(svc TenantService) (*resource.Tenant, error) { return svc.Get(r.Context(), mux.Vars(r)["tenant"]) })
}

func (s *Handler) ownTenant(w http.ResponseWriter, r *http.Request) {
	s.answerTenant(w, r, func(svc TenantService) (*resource.Tenant, error) { return svc.Own(r.Context()) })
}

// answerTenant answers the tenant read returns.
func (s *Handler) answerTenant(w http.ResponseWriter, r *http.Request, read func(TenantService) (*resource.Tenant, error)) {
	svc, err := s.tenants()
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	t, err := read(svc)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.respond(w, r, http.StatusOK, presentTenant(t))
}

// tenantsPage reads a tenants list's size and after.
func tenantsPage(r *http.Request) (size int, after string, err error) {
	q := r.URL.Query()
	size = defaultPageSize
	if v := q.Get("size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return 0, "", badParam("size", fmt.Sprintf("must be a whole number from 1 to %d", maxPageSize))
		}
		size = n
	}
	after = q.Get("after")
	if len(after) > resource.MaxTenantLength {
		return 0, "", badParam("after", fmt.Sprintf("must be a tenant id, at most %d bytes", resource.MaxTenantLength))
	}
	return size, after, nil
}

func (s *Handler) listTenants(w http.ResponseWriter, r *http.Request) {
	svc, err := s.tenants()
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	size, after, err := tenantsPage(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	page, more, err := svc.List(r.Context(), after, size)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := api.TenantList{Kind: "TenantList", Size: size, Items: make([]api.Tenant, len(page))}
	for i := range page {
		out.Items[i] = presentTenant(&page[i])
	}
	if more {
		out.Next = &page[len(page)-1].ID
	}
	s.respond(w, r, http.StatusOK, out)
}

// tenantPutBody is api.TenantPut with quotas as a pointer, so that a body without them is refused rather than
// taken for "no limits".
type tenantPutBody struct {
	Quotas *api.TenantQuotas `json:"quotas"`
}

func (s *Handler) putTenant(w http.ResponseWriter, r *http.Request) {
	svc, err := s.tenants()
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var body tenantPutBody
	if err := decodeStrict(r, &body); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if body.Quotas == nil {
		writeError(w, r, s.log, &resource.Error{Code: resource.CodeMalformed,
			Message: `quotas is required: an object such as {"clusters": 10, "nodepool_devices": 30}, where null is no limit`,
			Fields:  []resource.FieldError{{Field: "quotas", Message: "is required"}}})
		return
	}
	t, err := svc.Put(r.Context(), mux.Vars(r)["tenant"], resource.Quotas{Clusters: body.Quotas.Clusters, NodePoolDevices: body.Quotas.NodepoolDevices})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.respond(w, r, http.StatusOK, presentTenant(t))
}
