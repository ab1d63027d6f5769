package adapter

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// heldFields are what a pending watch asks its events to carry: the whole resource as a reconcile reads it, so
// that the reconcile an event queues need not read it again.
const heldFields = "id,name,labels,generation,spec,status,deleted_time,owner_references"

// heldObjects holds the resource each queued key's event brought, until the reconcile the event queued takes it.
// An entry lives only from the event to that reconcile: a later reconcile (a re-check the reconciler asked for, a
// retry) reads the API, since a change that leaves the resource not pending for the adapter (a label, another
// adapter's report) sends this adapter no event and would leave a held copy behind.
//
// kept holds, for a Controller with KeepObject, the resource as its last reconcile saw it, for the reconciles the
// runtime itself schedules (a re-check the reconciler asked for, a retry); any event, poll or wake about the key
// lets go of it first, so that a reconcile something else asked for reads the resource as it is.
type heldObjects struct {
	mu      sync.Mutex
	objects map[Key]*Object
	kept    map[Key]*Object
}

func newHeldObjects() *heldObjects {
	return &heldObjects{objects: map[Key]*Object{}, kept: map[Key]*Object{}}
}

// keep keeps obj, without its parent and last report, as key's last reconcile saw it.
func (h *heldObjects) keep(key Key, obj *Object) {
	o := *obj
	o.Parent, o.LastReport = nil, nil
	h.mu.Lock()
	h.kept[key] = &o
	h.mu.Unlock()
}

// unkeep lets go of what key's last reconcile saw: something other than the runtime's own schedule asks for it.
func (h *heldObjects) unkeep(key Key) {
	h.mu.Lock()
	delete(h.kept, key)
	h.mu.Unlock()
}

// takeKept returns a copy of what key's last reconcile saw, or nil.
func (h *heldObjects) takeKept(key Key) *Object {
	h.mu.Lock()
	defer h.mu.Unlock()
	if o := h.kept[key]; o != nil {
		c := *o
		return &c
	}
	return nil
}

// put holds obj for key, unless a newer generation is held already.
func (h *heldObjects) put(key Key, obj *Object) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if prev := h.objects[key]; prev != nil && prev.Generation > obj.Generation {
		return
	}
	h.objects[key] = obj
}

// drop lets go of obj if it is still what key holds.
func (h *heldObjects) drop(key Key, obj *Object) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.objects[key] == obj {
		delete(h.objects, key)
	}
}

// forget lets go of whatever key holds.
func (h *heldObjects) forget(key Key) {
	h.mu.Lock()
	delete(h.objects, key)
	delete(h.kept, key)
	h.mu.Unlock()
}

// take returns and lets go of what key holds, or nil.
func (h *heldObjects) take(key Key) *Object {
	h.mu.Lock()
	defer h.mu.Unlock()
	obj := h.objects[key]
	delete(h.objects, key)
	return obj
}

// len returns how many objects are held.
func (h *heldObjects) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.objects)
}

// objectOf reads a watch event's resource, as the API read it when it sent the event, as a reconcile's Object
// (without its parent and the adapter's last report). It returns nil when the event carries no resource or not
// every member a reconcile reads (a watch asked for fewer fields).
func objectOf(kind *Kind, e *api.WatchEvent) (*Object, error) {
	if len(e.Object) == 0 {
		return nil, nil
	}
	var v api.SparseResource
	if err := json.Unmarshal(e.Object, &v); err != nil {
		return nil, fmt.Errorf("watch event of %s: the resource: %w", kind.Name, err)
	}
	if v.Name == nil || v.Generation == nil || v.Spec == nil || v.Status == nil || (kind.Parent != nil && v.OwnerReferences == nil) {
		return nil, nil
	}
	raw, err := json.Marshal(*v.Spec)
	if err != nil {
		return nil, fmt.Errorf("encode %s spec: %w", kind.Name, err)
	}
	obj := &Object{Kind: kind.Name, ID: v.Id.String(), Name: *v.Name, Generation: *v.Generation, Spec: raw,
		DeletedTime: v.DeletedTime, Phase: conditions.Phase(v.Status.Phase), Conditions: conditionsOf(v.Status.Conditions)}
	if v.Labels != nil {
		obj.Labels = *v.Labels
	}
	if v.OwnerReferences != nil {
		obj.ParentID = v.OwnerReferences.Id.String()
	}
	return obj, nil
}

// neverReported reports whether obj's aggregated status says that adapter, a required adapter of its kind, has
// not reported on it: the API mirrors every required adapter's report in a condition, whose observed generation
// stays 0 until the first report. The adapter's last report is then known to be none without reading it.
func neverReported(obj *Object, adapter string) bool {
	c, ok := conditions.Find(obj.Conditions, conditions.AdapterAvailable(adapter))
	return ok && c.Reason == conditions.ReasonNotReported && c.ObservedGeneration == 0
}

// parentCache holds the parents read for the reconciles of a Controller with ParentMaxAge, by id, each with when it
// was read. Parents older than their age are dropped as others are added, so it holds about the parents of the
// children reconciled within the age.
type parentCache struct {
	mu      sync.Mutex
	parents map[string]cachedParent
}

type cachedParent struct {
	obj *Object
	at  time.Time
}

func newParentCache() *parentCache { return &parentCache{parents: map[string]cachedParent{}} }

// get returns the parent of id read less than maxAge before now, or nil.
func (c *parentCache) get(id string, now time.Time, maxAge time.Duration) *Object {
	if maxAge <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.parents[id]
	if !ok || now.Sub(p.at) >= maxAge {
		return nil
	}
	return p.obj
}

// put holds the parent of id, read at now, and drops those older than maxAge.
func (c *parentCache) put(id string, obj *Object, now time.Time, maxAge time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, p := range c.parents {
		if now.Sub(p.at) >= maxAge {
			delete(c.parents, k)
		}
	}
	c.parents[id] = cachedParent{obj: obj, at: now}
}
