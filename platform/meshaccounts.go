package platform

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// WhatMeshServiceAccount names an entry of guard.meshServiceAccounts in a Finding.
const WhatMeshServiceAccount = "mesh-service-account"

// checkMeshServiceAccounts reports each entry of guard.meshServiceAccounts that no live pod runs
// as. The guard lets only these write the waypoint's objects and the root certificate in managed
// namespaces, and nothing else tells a wrong one: mesh.revision set to a revision tag makes the
// default istiod-<tag>, a ServiceAccount no istiod runs as (istiod runs as istiod-<revision>,
// and serves the Gateways of every tag that points at its revision).
func checkMeshServiceAccounts(ctx context.Context, r client.Reader, cfg *config.Config) ([]Finding, error) {
	var out []Finding
	for i, entry := range cfg.Guard.MeshServiceAccounts {
		path := fmt.Sprintf("guard.meshServiceAccounts[%d]", i)
		namespace, sa, ok := strings.Cut(entry, "/")
		if !ok {
			return nil, fmt.Errorf("%s %q: want namespace/name", path, entry)
		}
		_, pods, err := serviceAccountPods(ctx, r, namespace, sa)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", path, entry, err)
		}
		if len(pods) > 0 {
			continue
		}
		out = append(out, Finding{Kind: FindingMeshServiceAccountNotRunning, What: WhatMeshServiceAccount, Namespace: namespace,
			Problem: fmt.Sprintf("no pod runs as ServiceAccount %s (%s): the guard lets only guard.meshServiceAccounts write the waypoint's Deployment, "+
				"Service and ServiceAccount and the root certificate in managed namespaces, so if istiod runs as another, its writes to waypoints will be refused "+
				"and no namespace gets a Programmed waypoint", entry, path),
			Fix: "name istiod's real ServiceAccount in guard.meshServiceAccounts (kubectl -n " + namespace + " get pods -l app=istiod -o jsonpath='{..serviceAccountName}'), " +
				"then render and apply the guard again: " + renderHint + ". A revision tag is not a revision: with mesh.revision set to a tag, " +
				"the default istiod-<tag> names no ServiceAccount; istiod runs as istiod-<revision>"})
	}
	return out, nil
}
