package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// VersionStreams and UpgradeSchedules are platform objects: every cluster that names one follows it, so only roles
// platform and admin write them; users and viewers read them.
func TestPlatformObjectsAreWrittenByPlatformAndAdminOnly(t *testing.T) {
	s, mint := startSecuredServer(t)
	ctx := ctxFor(t)
	tokens := map[string]api.RequestEditorFn{
		"viewer":   bearer(mint("vera", []auth.Role{auth.RoleViewer}, "")),
		"user":     bearer(mint("uma", []auth.Role{auth.RoleUser}, "")),
		"adapter":  bearer(mint("svc", []auth.Role{auth.RoleAdapter}, "applier")),
		"platform": bearer(mint("pat", []auth.Role{auth.RolePlatform}, "")),
		"admin":    bearer(mint("root", []auth.Role{auth.RoleAdmin}, "")),
	}
	mayWrite := map[string]bool{"platform": true, "admin": true}
	for role, as := range tokens {
		t.Run(role, func(t *testing.T) {
			stream, err := s.CreateVersionStreamWithResponse(ctx, nil, api.VersionStreamCreate{Name: "vs-" + role, Spec: api.VersionStreamSpec{TargetVersion: "4.16"}}, as)
			require.NoError(t, err)
			sched, err := s.CreateUpgradeScheduleWithResponse(ctx, nil, api.UpgradeScheduleCreate{Name: "us-" + role, Spec: api.UpgradeScheduleSpec{}}, as)
			require.NoError(t, err)
			if !mayWrite[role] {
				p := problem(t, stream.HTTPResponse, stream.Body, http.StatusForbidden, "HYPERFLEET-AUZ-001")
				require.Contains(t, deref(p.Detail), "requires role platform or admin")
				problem(t, sched.HTTPResponse, sched.Body, http.StatusForbidden, "HYPERFLEET-AUZ-001")
				// Nor may it change or delete the ones that exist.
				existing := streamNamed(t, s, defaultStream, as)
				patch, err := s.PatchVersionStreamWithBodyWithResponse(ctx, existing.Id, nil, "application/merge-patch+json",
					strings.NewReader(`{"spec":{"channel_group":"candidate"}}`), as)
				require.NoError(t, err)
				problem(t, patch.HTTPResponse, patch.Body, http.StatusForbidden, "HYPERFLEET-AUZ-001")
				del, err := s.DeleteVersionStreamWithResponse(ctx, existing.Id, as)
				require.NoError(t, err)
				problem(t, del.HTTPResponse, del.Body, http.StatusForbidden, "HYPERFLEET-AUZ-001")
				return
			}
			require.Equal(t, http.StatusCreated, stream.StatusCode(), "body: %s", stream.Body)
			require.Equal(t, http.StatusCreated, sched.StatusCode(), "body: %s", sched.Body)
			patch, err := s.PatchUpgradeScheduleWithBodyWithResponse(ctx, sched.JSON201.Id, nil, "application/merge-patch+json",
				strings.NewReader(`{"spec":{"timezone":"Europe/Berlin"}}`), as)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, patch.StatusCode(), "body: %s", patch.Body)
			del, err := s.DeleteUpgradeScheduleWithResponse(ctx, sched.JSON201.Id, as)
			require.NoError(t, err)
			require.Equal(t, http.StatusAccepted, del.StatusCode(), "body: %s", del.Body)
		})
	}
	// Everyone who reads reads them; a platform operator is no user of clusters.
	for _, role := range []string{"viewer", "user", "platform"} {
		list, err := s.ListVersionStreamsWithResponse(ctx, nil, tokens[role])
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, list.StatusCode(), role)
	}
	cluster, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "by-platform", Spec: clusterSpec(defaultStream)}, tokens["platform"])
	require.NoError(t, err)
	problem(t, cluster.HTTPResponse, cluster.Body, http.StatusForbidden, "HYPERFLEET-AUZ-001")
	cluster, err = s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "by-user", Spec: clusterSpec(defaultStream)}, tokens["user"])
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, cluster.StatusCode(), "a user still names the platform's objects: %s", cluster.Body)
}

// A stream's arch never changes, and its target_version moves forward one minor at a time unless an admin forces
// it: every cluster on the stream would otherwise roll to another architecture, a downgrade or a minor it cannot
// upgrade to.
func TestVersionStreamChangesAreRuled(t *testing.T) {
	s, mint := startSecuredServer(t)
	ctx := ctxFor(t)
	platform := bearer(mint("pat", []auth.Role{auth.RolePlatform}, ""))
	admin := bearer(mint("root", []auth.Role{auth.RoleAdmin}, ""))
	created, err := s.CreateVersionStreamWithResponse(ctx, nil, api.VersionStreamCreate{Name: "ruled", Spec: api.VersionStreamSpec{TargetVersion: "4.16"}}, platform)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), "body: %s", created.Body)
	id := created.JSON201.Id
	patch := func(t *testing.T, body string, force *bool, as api.RequestEditorFn) *api.PatchVersionStreamResponse {
		t.Helper()
		var params *api.PatchVersionStreamParams
		if force != nil {
			params = &api.PatchVersionStreamParams{Force: force}
		}
		resp, err := s.PatchVersionStreamWithBodyWithResponse(ctx, id, params, "application/merge-patch+json", strings.NewReader(body), as)
		require.NoError(t, err)
		return resp
	}
	steps := []struct {
		name   string
		body   string
		force  *bool
		as     api.RequestEditorFn
		status int
		code   string // for a refusal
		target string // the stored target_version after the step
	}{
		{name: "arch cannot change", body: `{"spec":{"arch":"arm64"}}`, as: admin, status: http.StatusUnprocessableEntity, code: "HYPERFLEET-VAL-007", target: "4.16"},
		{name: "arch cannot change by force either", body: `{"spec":{"arch":"arm64"}}`, force: ptr(true), as: admin, status: http.StatusUnprocessableEntity, code: "HYPERFLEET-VAL-007", target: "4.16"},
		{name: "one minor forward", body: `{"spec":{"target_version":"4.17"}}`, as: platform, status: http.StatusOK, target: "4.17"},
		{name: "two minors forward", body: `{"spec":{"target_version":"4.19"}}`, as: platform, status: http.StatusConflict, code: "HYPERFLEET-CNF-006", target: "4.17"},
		{name: "backwards", body: `{"spec":{"target_version":"4.16"}}`, as: admin, status: http.StatusConflict, code: "HYPERFLEET-CNF-006", target: "4.17"},
		{name: "another major", body: `{"spec":{"target_version":"5.0"}}`, as: platform, status: http.StatusConflict, code: "HYPERFLEET-CNF-006", target: "4.17"},
		{name: "force is admin's", body: `{"spec":{"target_version":"4.16"}}`, force: ptr(true), as: platform, status: http.StatusForbidden, code: "HYPERFLEET-AUZ-001", target: "4.17"},
		{name: "an admin forces backwards", body: `{"spec":{"target_version":"4.16"}}`, force: ptr(true), as: admin, status: http.StatusOK, target: "4.16"},
		{name: "an admin forces a jump", body: `{"spec":{"target_version":"4.18"}}`, force: ptr(true), as: admin, status: http.StatusOK, target: "4.18"},
		{name: "force=false is no force", body: `{"spec":{"target_version":"4.16"}}`, force: ptr(false), as: admin, status: http.StatusConflict, code: "HYPERFLEET-CNF-006", target: "4.18"},
		{name: "other fields change freely", body: `{"spec":{"channel_group":"fast"}}`, as: platform, status: http.StatusOK, target: "4.18"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			resp := patch(t, st.body, st.force, st.as)
			if st.code != "" {
				problem(t, resp.HTTPResponse, resp.Body, st.status, st.code)
			} else {
				require.Equal(t, st.status, resp.StatusCode(), "body: %s", resp.Body)
			}
			got, err := s.GetVersionStreamWithResponse(ctx, id, platform)
			require.NoError(t, err)
			require.Equal(t, st.target, got.JSON200.Spec.TargetVersion)
			require.Equal(t, api.VersionStreamSpecArchAmd64, *got.JSON200.Spec.Arch)
		})
	}
	t.Run("force that is not a boolean", func(t *testing.T) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPatch, s.base+"/api/hyperfleet/v1/versionstreams/"+id.String()+"?force=yes-please",
			strings.NewReader(`{"spec":{"target_version":"4.18"}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/merge-patch+json")
		req.Header.Set("Authorization", "Bearer "+mint("root", []auth.Role{auth.RoleAdmin}, ""))
		resp, err := s.http.Do(req)
		require.NoError(t, err)
		body := []byte(readAll(t, resp))
		problem(t, resp, body, http.StatusBadRequest, "HYPERFLEET-VAL-004")
	})
}

// An adapter reports only on kinds that require it, or that the ACL file lists for it: the applier, required on
// clusters, cannot write conditions on a version stream (which every cluster on it would then follow).
func TestAdaptersReportOnlyOnTheirKinds(t *testing.T) {
	acl := filepath.Join(t.TempDir(), "acl.yaml")
	require.NoError(t, os.WriteFile(acl, []byte(`
adapters:
  svc-applier: applier
  svc-auditor: {adapter: auditor, kinds: [versionstreams]}
admins: [root]
`), 0o600))
	s, mint := startSecuredServer(t, func(c *server.Config) { c.ACLFile = acl })
	ctx := ctxFor(t)
	root := bearer(mint("root", nil, ""))
	created, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "reported", Spec: clusterSpec(defaultStream)}, root)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), "body: %s", created.Body)
	stream := streamNamed(t, s, defaultStream, root)
	now := time.Now().UTC()
	tests := []struct {
		name    string
		as      string
		adapter string
		kind    string
		want    int
	}{
		{name: "the applier on a cluster, which requires it", as: "svc-applier", adapter: "applier", kind: "cluster", want: http.StatusCreated},
		{name: "the applier on a version stream", as: "svc-applier", adapter: "applier", kind: "versionstream", want: http.StatusForbidden},
		{name: "an adapter listed for version streams", as: "svc-auditor", adapter: "auditor", kind: "versionstream", want: http.StatusCreated},
		{name: "that adapter on a cluster", as: "svc-auditor", adapter: "auditor", kind: "cluster", want: http.StatusForbidden},
		{name: "an admin anywhere", as: "root", adapter: "anyone", kind: "versionstream", want: http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			as := bearer(mint(tt.as, nil, ""))
			rep := report(tt.adapter, 1, now, available("True"))
			var (
				resp *http.Response
				body []byte
			)
			switch tt.kind {
			case "cluster":
				r, err := s.PostClusterStatusWithResponse(ctx, created.JSON201.Id, rep, as)
				require.NoError(t, err)
				resp, body = r.HTTPResponse, r.Body
			default:
				r, err := s.PostVersionStreamStatusWithResponse(ctx, stream.Id, rep, as)
				require.NoError(t, err)
				resp, body = r.HTTPResponse, r.Body
			}
			if tt.want == http.StatusForbidden {
				p := problem(t, resp, body, http.StatusForbidden, "HYPERFLEET-AUZ-001")
				require.Contains(t, deref(p.Detail), "may report only on kinds that require it")
				return
			}
			require.Equal(t, tt.want, resp.StatusCode, "body: %s", body)
		})
	}
}

// The JWKS file and the ACL file are reloaded when they change, as the TLS certificate is: a rotated issuer key
// and a changed grant take effect without a restart, and a bad new file keeps the last good one.
func TestJWKSAndACLFilesAreReloaded(t *testing.T) {
	dir := t.TempDir()
	first, err := auth.LoadOrCreateDevIssuer(filepath.Join(dir, "first"))
	require.NoError(t, err)
	second, err := auth.LoadOrCreateDevIssuer(filepath.Join(dir, "second"))
	require.NoError(t, err)
	jwks, acl := filepath.Join(dir, "jwks.json"), filepath.Join(dir, "acl.yaml")
	step := time.Now()
	// rewrite replaces a file's content and moves its modification time on, as a rotation does.
	rewrite := func(t *testing.T, path string, content []byte) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, content, 0o600))
		step = step.Add(time.Minute)
		require.NoError(t, os.Chtimes(path, step, step))
	}
	jwksOf := func(t *testing.T, issuer *auth.DevIssuer) []byte {
		t.Helper()
		raw, err := os.ReadFile(issuer.JWKSPath())
		require.NoError(t, err)
		return raw
	}
	rewrite(t, jwks, jwksOf(t, first))
	rewrite(t, acl, []byte("users: {carol: [viewer]}\n"))
	s := startServerOn(t, harness.NewDatabase(t), server.Config{
		EnableJWT: true, EnableAuthz: true, ACLFile: acl,
		JWT: auth.VerifierConfig{JWKSFile: jwks, Issuer: testIssuer, Audience: testAudience},
	})
	ctx := ctxFor(t)
	mint := func(t *testing.T, issuer *auth.DevIssuer) api.RequestEditorFn {
		t.Helper()
		token, err := issuer.Mint("carol", nil, "", time.Hour, testIssuer, testAudience)
		require.NoError(t, err)
		return bearer(token)
	}
	n := 0
	create := func(t *testing.T, as api.RequestEditorFn) (*http.Response, []byte) {
		t.Helper()
		n++
		resp, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "reload-" + string(rune('a'+n)), Spec: clusterSpec(defaultStream)}, as)
		require.NoError(t, err)
		return resp.HTTPResponse, resp.Body
	}

	resp, body := create(t, mint(t, first))
	problem(t, resp, body, http.StatusForbidden, "HYPERFLEET-AUZ-001")

	t.Run("a changed ACL grants at once", func(t *testing.T) {
		rewrite(t, acl, []byte("users: {carol: [user]}\n"))
		resp, body := create(t, mint(t, first))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "body: %s", body)
	})
	t.Run("a bad ACL keeps the last good one", func(t *testing.T) {
		rewrite(t, acl, []byte("users: {carol: [superuser]}\n"))
		resp, body := create(t, mint(t, first))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "body: %s", body)
	})
	t.Run("a rotated JWKS verifies the new key's tokens only", func(t *testing.T) {
		rewrite(t, jwks, jwksOf(t, second))
		resp, body := create(t, mint(t, first))
		problem(t, resp, body, http.StatusUnauthorized, "HYPERFLEET-AUT-001")
		resp, body = create(t, mint(t, second))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "body: %s", body)
	})
	t.Run("a bad JWKS keeps the last good keys", func(t *testing.T) {
		rewrite(t, jwks, []byte(`{"keys": "not a set"}`))
		resp, body := create(t, mint(t, second))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "body: %s", body)
	})
}
