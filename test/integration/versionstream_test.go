package integration

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func TestVersionStreamSpecIsValidatedAndDefaulted(t *testing.T) {
	s := startServerWith(t, map[string][]string{"versionstream": {"version-resolver"}})
	ctx := ctxFor(t)

	resp, err := s.CreateVersionStreamWithResponse(ctx, nil, api.VersionStreamCreate{Name: "s", Spec: api.VersionStreamSpec{TargetVersion: "4.17"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), "body: %s", resp.Body)
	got := resp.JSON201
	require.Equal(t, api.VersionStreamSpecChannelGroupStable, *got.Spec.ChannelGroup)
	require.Equal(t, api.VersionStreamSpecArchAmd64, *got.Spec.Arch)
	require.Equal(t, "/api/hyperfleet/v1/versionstreams/"+got.Id.String(), got.Href)
	require.Equal(t, api.ResourceStatusPhasePending, got.Status.Phase, "the resolver has not reported yet")

	pending, err := s.ListVersionStreamsWithResponse(ctx, &api.ListVersionStreamsParams{PendingFor: ptr("version-resolver")})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, pending.StatusCode())
	var pendingNames []string
	for _, v := range pending.JSON200.Items {
		pendingNames = append(pendingNames, v.Name)
	}
	require.ElementsMatch(t, []string{defaultStream, "s"}, pendingNames, "streams made before the adapter was required are pending too")

	tests := []struct {
		name  string
		body  string
		field string
	}{
		{"target without minor", `{"name":"x","spec":{"target_version":"4"}}`, "spec.target_version"},
		{"target with patch", `{"name":"x","spec":{"target_version":"4.16.3"}}`, "spec.target_version"},
		{"target missing", `{"name":"x","spec":{}}`, "spec.target_version"},
		{"unknown channel group", `{"name":"x","spec":{"target_version":"4.16","channel_group":"nightly"}}`, "spec.channel_group"},
		{"unknown arch", `{"name":"x","spec":{"target_version":"4.16","arch":"x86_64"}}`, "spec.arch"},
		{"name too long", `{"name":"` + strings.Repeat("a", 64) + `","spec":{"target_version":"4.16"}}`, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.CreateVersionStreamWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(tt.body))
			require.NoError(t, err)
			p := problem(t, resp.HTTPResponse, resp.Body, http.StatusBadRequest, "HYPERFLEET-VAL-002")
			require.Contains(t, fields(p), tt.field)
		})
	}
}

func TestClustersMustNameALiveVersionStream(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)

	resp, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "orphan", Spec: clusterSpec("no-such-stream")})
	require.NoError(t, err)
	p := problem(t, resp.HTTPResponse, resp.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-006")
	require.Equal(t, []string{"spec.version_stream"}, fields(p))
	list, err := s.ListClustersWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Zero(t, deref(list.JSON200.Total), "a refused create stores nothing")

	c := createCluster(t, s, "user", nil)
	patch, err := s.PatchClusterWithBodyWithResponse(ctx, c.Id, nil, "application/merge-patch+json", strings.NewReader(`{"spec":{"version_stream":"no-such-stream"}}`))
	require.NoError(t, err)
	problem(t, patch.HTTPResponse, patch.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-006")

	other, err := s.CreateVersionStreamWithResponse(ctx, nil, api.VersionStreamCreate{Name: "fast-4-17", Spec: api.VersionStreamSpec{TargetVersion: "4.17"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, other.StatusCode())
	patch, err = s.PatchClusterWithBodyWithResponse(ctx, c.Id, nil, "application/merge-patch+json", strings.NewReader(`{"spec":{"version_stream":"fast-4-17"}}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, patch.StatusCode(), "body: %s", patch.Body)
	require.Equal(t, int64(2), patch.JSON200.Generation)

	// The stream the cluster now names cannot go; the one it left can.
	del, err := s.DeleteVersionStreamWithResponse(ctx, other.JSON201.Id)
	require.NoError(t, err)
	p = problem(t, del.HTTPResponse, del.Body, http.StatusConflict, "HYPERFLEET-CNF-005")
	require.Contains(t, deref(p.Detail), "user")
	old := streamNamed(t, s, defaultStream)
	del, err = s.DeleteVersionStreamWithResponse(ctx, old.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, del.StatusCode(), "body: %s", del.Body)

	// A deleted stream cannot be named any more.
	resp, err = s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: "late", Spec: clusterSpec(defaultStream)})
	require.NoError(t, err)
	problem(t, resp.HTTPResponse, resp.Body, http.StatusUnprocessableEntity, "HYPERFLEET-VAL-006")

	// Once the cluster is being deleted it no longer holds its stream.
	_, err = s.DeleteClusterWithResponse(ctx, c.Id)
	require.NoError(t, err)
	del, err = s.DeleteVersionStreamWithResponse(ctx, other.JSON201.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, del.StatusCode(), "body: %s", del.Body)
}

// A stream deleted while clusters are being created against it either goes (and every create fails) or is
// refused (and the creates that got in hold it): never a live cluster naming a deleted stream.
func TestDeletingAStreamRacesCreatesSafely(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	for round := range 5 {
		name := "race-" + string(rune('a'+round))
		stream, err := s.CreateVersionStreamWithResponse(ctx, nil, api.VersionStreamCreate{Name: name, Spec: api.VersionStreamSpec{TargetVersion: "4.16"}})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, stream.StatusCode())
		var wg sync.WaitGroup
		created := make([]int, 8)
		for i := range created {
			wg.Go(func() {
				resp, err := s.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: name + "-c" + string(rune('0'+i)), Spec: clusterSpec(name)})
				require.NoError(t, err)
				created[i] = resp.StatusCode()
			})
		}
		del, err := s.DeleteVersionStreamWithResponse(ctx, stream.JSON201.Id)
		require.NoError(t, err)
		wg.Wait()
		live, err := s.ListClustersWithResponse(ctx, &api.ListClustersParams{Search: ptr("spec.version_stream = '" + name + "'")})
		require.NoError(t, err)
		switch del.StatusCode() {
		case http.StatusAccepted:
			require.Zero(t, deref(live.JSON200.Total), "the stream went, so no cluster may name it (creates: %v)", created)
		case http.StatusConflict:
			require.NotZero(t, deref(live.JSON200.Total))
		default:
			t.Fatalf("delete answered %d: %s", del.StatusCode(), del.Body)
		}
		for _, code := range created {
			require.Contains(t, []int{http.StatusCreated, http.StatusUnprocessableEntity}, code)
		}
	}
}

func streamNamed(tb testing.TB, s *apiServer, name string, editors ...api.RequestEditorFn) api.VersionStream {
	tb.Helper()
	resp, err := s.ListVersionStreamsWithResponse(ctxFor(tb), &api.ListVersionStreamsParams{Search: ptr("name = '" + name + "'")}, editors...)
	require.NoError(tb, err)
	require.Equal(tb, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
	require.Len(tb, resp.JSON200.Items, 1)
	return resp.JSON200.Items[0]
}

func fields(p api.Problem) []string {
	var out []string
	for _, f := range deref(p.Errors) {
		out = append(out, f.Field)
	}
	return out
}
