// Package convert is `profile-plugins convert`: it rewrites selector-based AuthorizationPolicies
// into their ambient form, the same rules attached with targetRefs to a waypoint Gateway or a
// Service, and reports per policy the rules only a waypoint can enforce. It reads files or stdin
// and needs no cluster.
package convert
