package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// contains decides whether an observed object still holds what the plugin applies, so it decides
// drift: a field the plugin sets that another writer removed or changed is a difference, while
// fields the API server or other writers only added are not.
func TestContainsDecidesDrift(t *testing.T) {
	applied := map[string]any{"spec": map[string]any{
		"action":     "ALLOW",
		"targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint"}},
		"selector":   map[string]any{"matchLabels": map[string]any{"app": "x"}},
	}}
	cases := []struct {
		name     string
		observed map[string]any
		want     bool
		at       string
	}{
		{"identical", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint"}},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, true, ""},
		{"extra defaulted field", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint", "group": "g"}},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}}, "provider": nil,
		}}, true, ""},
		{"targetRefs removed", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, false, ".spec.targetRefs"},
		{"selector removed", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint"}},
		}}, false, ".spec.selector"},
		{"action changed", map[string]any{"spec": map[string]any{
			"action": "AUDIT", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint"}},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, false, ".spec.action"},
		{"extra list element", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint"}, map[string]any{"kind": "Service", "name": "s"}},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, false, ".spec.targetRefs"},
		{"list element changed", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "other"}},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, false, ".spec.targetRefs[0].name"},
		{"list replaced by a map", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": map[string]any{"kind": "Gateway"},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, false, ".spec.targetRefs"},
		{"map replaced by a string", map[string]any{"spec": "x"}, false, ".spec"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, at := contains(tc.observed, applied, "")
			assert.Equal(t, tc.want, ok)
			if !tc.want {
				assert.Equal(t, tc.at, at)
			}
		})
	}
}

// Server-side apply stores no empty map or list, so an empty one the plugin applies is held by an
// object that lacks it; a non-empty one is not.
func TestContainsTreatsOnlyEmptyValuesAsUnset(t *testing.T) {
	for name, tc := range map[string]struct {
		want any
		ok   bool
	}{
		"nil":            {nil, true},
		"empty map":      {map[string]any{}, true},
		"empty list":     {[]any{}, true},
		"non-empty map":  {map[string]any{"a": "b"}, false},
		"non-empty list": {[]any{"a"}, false},
		"empty string":   {"", false},
		"false":          {false, false},
	} {
		t.Run(name, func(t *testing.T) {
			ok, _ := contains(map[string]any{}, map[string]any{"f": tc.want}, "")
			assert.Equal(t, tc.ok, ok)
		})
	}
}
