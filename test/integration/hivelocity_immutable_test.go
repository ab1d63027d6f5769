package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Where a pool's devices come from cannot change: the provisioner would keep the devices it has and report them
// ready in the old place. A change of the region, the device type or the selector is refused with
// HYPERFLEET-VAL-007 and a message that says what to do instead, even when forced, and the pool is left as it
// was; the fields that may change still do.
func TestHivelocityPlacementIsImmutable(t *testing.T) {
	s, c := hvServer(t)
	p := createHVPool(t, s, c, "fixed", poolSpec(2, "#v1\n"))
	before := getPool(t, s, p)

	tests := []struct {
		name  string
		patch string
		field string
		force bool
	}{
		{name: "region", patch: `{"region":"NYC1"}`, field: "spec.platform.hivelocity.region"},
		{name: "device type", patch: `{"device_type":"s1.large"}`, field: "spec.platform.hivelocity.device_type"},
		{name: "selector value", patch: `{"selector":{"rack":"r2"}}`, field: "spec.platform.hivelocity.selector"},
		{name: "selector key added", patch: `{"selector":{"row":"a"}}`, field: "spec.platform.hivelocity.selector"},
		{name: "selector removed", patch: `{"selector":null}`, field: "spec.platform.hivelocity.selector"},
		{name: "region, forced", patch: `{"region":"NYC1"}`, field: "spec.platform.hivelocity.region", force: true},
		{name: "region beside a change that may be made", patch: `{"region":"NYC1","userdata":"#v2\n"}`, field: "spec.platform.hivelocity.region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := &api.PatchNodePoolParams{}
			if tt.force {
				params.Force = ptr(true)
			}
			resp, err := s.PatchNodePoolWithBodyWithResponse(ctxFor(t), c.Id, p.Id, params, "application/merge-patch+json",
				strings.NewReader(`{"spec":{"platform":{"hivelocity":`+tt.patch+`}}}`))
			require.NoError(t, err)
			prob := problem(t, resp.HTTPResponse, resp.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-007")
			require.Len(t, deref(prob.Errors), 1)
			require.Equal(t, tt.field, deref(prob.Errors)[0].Field)
			require.Contains(t, deref(prob.Detail), "create a new node pool")
			require.Contains(t, deref(prob.Detail), "scale this one down")

			after := getPool(t, s, p)
			require.Equal(t, before.Generation, after.Generation, "a refused change bumped the generation")
			require.Equal(t, before.Spec, after.Spec, "a refused change changed the spec")
		})
	}

	// Restating the placement as it is, or changing what a reload installs, is allowed.
	patchPool(t, s, p, `{"spec":{"platform":{"hivelocity":{"region":"`+hvRegion+`","device_type":"`+hvType+`","selector":{"rack":"r1"},"userdata":"#v2\n"}}}}`)
	after := getPool(t, s, p)
	require.Equal(t, before.Generation+1, after.Generation)
	require.Equal(t, "#v2\n", deref(after.Spec.Platform.Hivelocity.Userdata))
	require.Equal(t, before.Spec.Platform.Hivelocity.Region, after.Spec.Platform.Hivelocity.Region)
}
