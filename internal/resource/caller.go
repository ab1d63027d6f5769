package resource

import "context"

// Caller is who makes a request, as authentication established it.
type Caller struct {
	Name  string
	Admin bool // admins may write internal spec fields
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller in ctx; without one it is an anonymous non-admin, so that a missing
// authentication layer can never grant admin rights by accident.
func CallerFrom(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok {
		return c
	}
	return Caller{Name: "anonymous"}
}
