package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSearches(t *testing.T) {
	const id = "7d4fbd4e-7c5c-4e43-a3c9-1e0d7b2a5a10"
	tests := []struct {
		name string
		got  func() (string, error)
		want string
	}{
		{"quote", func() (string, error) { return tslString(`it's a \ test`), nil }, `'it\'s a \\ test'`},
		{"selector", func() (string, error) { return selectorSearch("env=dev, tier!=db,app==web") },
			`labels['env'] = 'dev' and labels['tier'] != 'db' and labels['app'] = 'web'`},
		{"selector with odd keys", func() (string, error) { return selectorSearch("example.com/team=core,app-name=x") },
			`labels['example.com/team'] = 'core' and labels['app-name'] = 'x'`},
		{"empty selector", func() (string, error) { return selectorSearch(" , ") }, ``},
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
	for _, bad := range []string{"env", "=dev", "env!"} {
		_, err := selectorSearch(bad)
		var uerr *usageError
		require.ErrorAs(t, err, &uerr, bad)
	}
}

func TestKindNames(t *testing.T) {
	set := newKindSet()
	for word, want := range map[string]string{
		"cluster": "clusters", "Clusters": "clusters", "cl": "clusters", "NodePool": "nodepools", "np": "nodepools",
		"versionstream": "versionstreams", "VS": "versionstreams", "upgradeschedules": "upgradeschedules", "us": "upgradeschedules",
	} {
		k, err := set.lookup(word)
		require.NoError(t, err, word)
		require.Equal(t, want, k.plural, word)
	}
	_, err := set.lookup("pods")
	var uerr *usageError
	require.ErrorAs(t, err, &uerr)
}
