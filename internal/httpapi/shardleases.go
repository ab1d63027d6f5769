package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// ShardLeaseService is what the shard lease routes need of the domain (resource.ShardLeases).
type ShardLeaseService interface {
	Acquire(ctx context.Context, req resource.ShardLeaseRequest) (*resource.ShardLeaseGrant, error)
	List(ctx context.Context, adapter string) (*resource.ShardLeaseState, error)
}

var _ ShardLeaseService = (*resource.ShardLeases)(nil)

// routeShardLeases registers the shard lease routes. Asking for leases is writing the adapter's reports' right:
// an adapter identity for its own adapter name, or an admin; the route checks the role before the body is read
// and the handler the adapter name of the path.
func (s *Handler) routeShardLeases(resources *mux.Router) {
	resources.Handle("/adapters/{adapter}/shard-leases", s.allow(auth.ActionRead, s.listShardLeases)).Methods(http.MethodGet)
	resources.Handle("/adapters/{adapter}/shard-leases", s.allow(auth.ActionWriteStatus, s.acquireShardLeases)).Methods(http.MethodPost)
}

// shardLeases returns the shard lease service, or the refusal of a handler built without one.
func (s *Handler) shardLeases() (ShardLeaseService, error) {
	if s.cfg.ShardLeases == nil {
		return nil, resource.Errorf(resource.CodeNotFound, "this server does not serve shard leases")
	}
	return s.cfg.ShardLeases, nil
}

func presentShardLease(l resource.ShardLease, withHolder bool, now time.Time) api.ShardLease {
	out := api.ShardLease{Shard: l.Shard, Generation: l.Generation}
	if l.Holder != "" && (!withHolder || l.ExpiresTime.After(now)) {
		holder, expires := l.Holder, l.ExpiresTime
		out.ExpiresTime = &expires
		if withHolder {
			out.Holder = &holder
		}
	}
	return out
}

func (s *Handler) listShardLeases(w http.ResponseWriter, r *http.Request) {
	svc, err := s.shardLeases()
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	adapter := mux.Vars(r)["adapter"]
	st, err := svc.List(r.Context(), adapter)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := api.ShardLeaseList{Kind: "ShardLeaseList", Adapter: adapter, Size: len(st.Leases), Items: make([]api.ShardLease, len(st.Leases)),
		ServerTime: st.Now}
	for i, l := range st.Leases {
		out.Items[i] = presentShardLease(l, true, st.Now)
	}
	s.respond(w, r, http.StatusOK, out)
}

func (s *Handler) acquireShardLeases(w http.ResponseWriter, r *http.Request) {
	svc, err := s.shardLeases()
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	adapter := mux.Vars(r)["adapter"]
	if err := s.authorize(r, auth.ActionWriteStatus, adapter); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var body api.ShardLeaseRequest
	if err := decodeStrict(r, &body); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	req := resource.ShardLeaseRequest{Adapter: adapter, Replica: body.Replica, ShardCount: body.ShardCount,
		TTL: time.Duration(body.TtlSeconds) * time.Second, Release: body.Release != nil && *body.Release}
	if body.Held != nil {
		for _, h := range *body.Held {
			req.Held = append(req.Held, resource.HeldShard{Shard: h.Shard, Generation: h.Generation})
		}
	}
	g, err := svc.Acquire(r.Context(), req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := api.ShardLeaseGrant{Kind: "ShardLeaseGrant", Adapter: g.Adapter, Replica: g.Replica, ShardCount: g.ShardCount,
		TtlSeconds: int(g.TTL / time.Second), LiveReplicas: g.LiveReplicas, FairShare: g.FairShare,
		Leases: make([]api.ShardLease, len(g.Leases)), Lost: g.Lost, ServerTime: g.Now}
	for i, l := range g.Leases {
		out.Leases[i] = presentShardLease(l, false, g.Now)
	}
	s.respond(w, r, http.StatusOK, out)
}
