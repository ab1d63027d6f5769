package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func TestSearches(t *testing.T) {
	const id = "7d4fbd4e-7c5c-4e43-a3c9-1e0d7b2a5a10"
	tests := []struct {
		name string
		got  func() (string, error)
		want string
	}{
		{"quote", func() (string, error) { return tslString(`it's a \ test`), nil }, `'it\'s a \\ test'`},
		// apimachinery parses the selector and orders its requirements by key.
		{"selector", func() (string, error) { return selectorSearch("env=dev, tier!=db,app==web") },
			`labels['app'] = 'web' and labels['env'] = 'dev' and labels['tier'] != 'db'`},
		{"selector with odd keys", func() (string, error) { return selectorSearch("example.com/team=core,app-name=x") },
			`labels['app-name'] = 'x' and labels['example.com/team'] = 'core'`},
		{"set-based selector", func() (string, error) { return selectorSearch("env in (dev, test),tier notin (db),team") },
			`labels['env'] in ['dev', 'test'] and labels['team'] like '%' and labels['tier'] not in ['db']`},
		{"empty selector", func() (string, error) { return selectorSearch(" ") }, ``},
		{"names", func() (string, error) { return namesSearch([]string{"a", "b"}), nil }, `name in ['a', 'b']`},
		{"names and ids", func() (string, error) { return namesSearch([]string{"a", id}), nil }, `name in ['a'] or id in ['` + id + `']`},
		{"and", func() (string, error) { return andSearch("a = 1", "", "b = 2 or c = 3"), nil }, `(a = 1) and (b = 2 or c = 3)`},
		{"and of one", func() (string, error) { return andSearch("", "a = 1"), nil }, `a = 1`},
		{"and of none", func() (string, error) { return andSearch("", " "), nil }, ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.got()
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	for _, bad := range []string{"!env", "=dev", "env!", "env in dev"} {
		_, err := selectorSearch(bad)
		var uerr *usageError
		require.ErrorAs(t, err, &uerr, bad)
	}
}

func TestKindNames(t *testing.T) {
	a := newApp(api.Kinds(), nil, nil, nil, nil)
	for word, want := range map[string]string{
		"cluster": "clusters", "Clusters": "clusters", "cl": "clusters", "NodePool": "nodepools", "np": "nodepools",
		"versionstream": "versionstreams", "VS": "versionstreams", "upgradeschedules": "upgradeschedules", "us": "upgradeschedules",
	} {
		k, err := a.lookupKind(word)
		require.NoError(t, err, word)
		require.Equal(t, want, k.Plural, word)
	}
	_, err := a.lookupKind("pods")
	var uerr *usageError
	require.ErrorAs(t, err, &uerr)
}
