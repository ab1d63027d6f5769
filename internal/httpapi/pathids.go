package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/gorilla/mux"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// pathIDs are the ids a resource route names, checked and in canonical form.
type pathIDs struct{ parent, id string }

type pathIDsKey struct{}

// idsOf returns the route's ids as withPathIDs stored them.
func idsOf(r *http.Request) pathIDs {
	ids, _ := r.Context().Value(pathIDsKey{}).(pathIDs)
	return ids
}

// withPathIDs checks the ids in r's path against the document (format: uuid, the 8-4-4-4-12 hex form) and puts
// their canonical, lower-case form where handlers read it, so that an id a client spelled in capitals comes back
// in hrefs, owner references and Location as the API spells it. A malformed id is a 400 naming the parameter: it
// cannot name a resource, and saying so beats a 404 that suggests one was deleted.
func (k *kindHandler) withPathIDs(r *http.Request) (*http.Request, error) {
	v := mux.Vars(r)
	var ids pathIDs
	var err error
	if raw, ok := v["parent_id"]; ok && k.d.Parent != nil {
		if ids.parent, err = canonicalID(raw, k.d.Parent); err != nil {
			return r, err
		}
	}
	if raw, ok := v["id"]; ok {
		if ids.id, err = canonicalID(raw, k.d); err != nil {
			return r, err
		}
	}
	return r.WithContext(context.WithValue(r.Context(), pathIDsKey{}, ids)), nil
}

// route wraps a resource route's handler: the caller's authorization first, then the ids in its path.
func (k *kindHandler) route(action auth.Action, h http.HandlerFunc) http.Handler {
	return k.s.allow(action, func(w http.ResponseWriter, r *http.Request) {
		r, err := k.withPathIDs(r)
		if err != nil {
			k.fail(w, r, err)
			return
		}
		h(w, r)
	})
}

// canonicalID accepts exactly the textual form the API sends (36 characters: uuid.Parse alone also takes braces,
// a urn:uuid: prefix and no hyphens), in either case, and returns it in lower case.
func canonicalID(raw string, d *resource.Descriptor) (string, error) {
	id, err := uuid.Parse(raw)
	if err != nil || len(raw) != 36 {
		param := strings.ToLower(d.Kind) + "_id"
		return "", &resource.Error{Code: resource.CodeMalformedID,
			Message: fmt.Sprintf("%s %q is not a UUID (8-4-4-4-12 hexadecimal digits)", param, raw),
			Fields:  []resource.FieldError{{Field: param, Message: "must be a UUID"}}}
	}
	return id.String(), nil
}
