package integration

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/httpapi"
	"github.com/hyperfleet/hyperfleet/internal/kinds"
	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/internal/schema"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// startWithCallers serves the API with a test authenticator: the X-Test-Caller header names the caller and
// "admin" makes it an admin, anyone else a user. Real tokens are tested in auth_test.go; this isolates the admin rule.
func startWithCallers(tb testing.TB) *api.ClientWithResponses {
	tb.Helper()
	dsn := harness.NewDatabase(tb)
	seedStream(tb, dsn, defaultStream)
	db := harness.OpenGorm(tb, dsn)
	doc, err := schema.Load(openapi.Document())
	require.NoError(tb, err)
	set, err := kinds.Build(doc, api.Kinds(), nil)
	require.NoError(tb, err)
	h, err := httpapi.NewHandler(httpapi.Config{
		Authenticate: func(r *http.Request) (auth.Identity, error) {
			name := r.Header.Get("X-Test-Caller")
			role := auth.RoleUser
			if name == "admin" {
				role = auth.RoleAdmin
			}
			return auth.Identity{Subject: name, Roles: []auth.Role{role}}, nil
		},
		Authorize: true,
	}, resource.NewService(postgres.NewStore(db, set.All), set.All), set.All, slog.New(slog.NewJSONHandler(io.Discard, nil)), nil)
	require.NoError(tb, err)
	ts := httptest.NewServer(h)
	tb.Cleanup(ts.Close)
	client, err := api.NewClientWithResponses(ts.URL)
	require.NoError(tb, err)
	return client
}

func as(name string) api.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("X-Test-Caller", name)
		return nil
	}
}

func TestInternalFieldsAreAdminOnly(t *testing.T) {
	c := startWithCallers(t)
	ctx := ctxFor(t)
	withPlatform := `{"name":"internal","spec":{"version_stream":"stable-4-16","hosted_cluster":{"platform":{"type":"Agent","agent":{"agent_namespace":"agents"}},"etcd":null}}}`

	resp, err := c.CreateClusterWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(withPlatform), as("alice"))
	require.NoError(t, err)
	p := problem(t, resp.HTTPResponse, resp.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-005")
	require.ElementsMatch(t, []api.FieldError{
		{Field: "spec.hosted_cluster.platform", Message: "is an internal field: only an admin may set it"},
		{Field: "spec.hosted_cluster.etcd", Message: "is an internal field: only an admin may set it"},
	}, deref(p.Errors))

	resp, err = c.CreateClusterWithBodyWithResponse(ctx, nil, "application/json",
		strings.NewReader(`{"name":"internal","spec":{"version_stream":"stable-4-16","hosted_cluster":{"platform":{"type":"Agent","agent":{"agent_namespace":"agents"}}}}}`), as("admin"))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	cluster := resp.JSON201
	require.Equal(t, "Agent", string(cluster.Spec.HostedCluster.Platform.Type))
	require.Equal(t, "admin", cluster.CreatedBy)

	// A user may change public fields of a cluster whose internal fields an admin set, but not those fields.
	patch, err := c.PatchClusterWithBodyWithResponse(ctx, cluster.Id, nil, "application/merge-patch+json",
		strings.NewReader(`{"spec":{"hosted_cluster":{"platform":null}}}`), as("alice"))
	require.NoError(t, err)
	problem(t, patch.HTTPResponse, patch.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-005")
	// Nulling the parent object would reset the internal fields to their defaults: also refused.
	patch, err = c.PatchClusterWithBodyWithResponse(ctx, cluster.Id, nil, "application/merge-patch+json",
		strings.NewReader(`{"spec":{"hosted_cluster":null}}`), as("alice"))
	require.NoError(t, err)
	p = problem(t, patch.HTTPResponse, patch.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-005")
	require.Contains(t, *p.Detail, "hosted_cluster.platform")
	patch, err = c.PatchClusterWithBodyWithResponse(ctx, cluster.Id, nil, "application/merge-patch+json",
		strings.NewReader(`{"spec":{"hosted_cluster":{"infrastructure_availability_policy":"HighlyAvailable"}}}`), as("alice"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patch.StatusCode(), "body: %s", patch.Body)
	require.Equal(t, "alice", patch.JSON200.UpdatedBy)

	// Internal fields are shown to those who may write them (and to adapters, which act on them) only: the
	// public document a user is served does not have them, and neither do the answers a user gets.
	for _, caller := range []string{"alice", "admin"} {
		got, err := c.GetClusterWithResponse(ctx, cluster.Id, as(caller))
		require.NoError(t, err)
		list, err := c.ListClustersWithResponse(ctx, nil, as(caller))
		require.NoError(t, err)
		require.Len(t, list.JSON200.Items, 1)
		for name, body := range map[string][]byte{"patch": patch.Body, "get": got.Body, "list": list.Body} {
			if caller == "admin" && name == "patch" {
				continue
			}
			for _, internal := range []string{`"platform"`, `"etcd"`, `"services"`, `"agent_namespace"`} {
				if caller == "admin" {
					require.Contains(t, string(body), internal, "%s as %s", name, caller)
				} else {
					require.NotContains(t, string(body), internal, "%s as %s", name, caller)
				}
			}
			require.Contains(t, string(body), `"infrastructure_availability_policy":"HighlyAvailable"`, "%s as %s: public fields stay", name, caller)
		}
	}
}
