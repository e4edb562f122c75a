package guard_test

// Kubeflow's Notebooks on the real API server.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/guard"
)

// notebookCRD is Kubeflow's Notebook CRD (kubeflow.org/v1) with an open spec.
func notebookCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "notebooks.kubeflow.org"},
		"spec": map[string]any{"group": "kubeflow.org", "scope": "Namespaced",
			"names": map[string]any{"kind": "Notebook", "listKind": "NotebookList", "plural": "notebooks", "singular": "notebook"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}},
	}}
}

func notebook(ns, name, headers string) *unstructured.Unstructured {
	nb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": name, "image": "registry.example.com/jupyter:1"}}}}},
	}}
	if headers != "" {
		nb.SetAnnotations(map[string]string{"notebooks.kubeflow.org/http-headers-request-set": headers})
	}
	return nb
}

// Kubeflow's notebook controller copies a Notebook's annotation
// notebooks.kubeflow.org/http-headers-request-set, any JSON object of headers, into the
// headers.request.set of the VirtualService that routes the ingress gateway to the notebook
// (kubeflow/notebooks components/notebook-controller/controllers/notebook_controller.go
// generateVirtualServices), and Istio makes "set" overwrite the request's header
// (pilot/pkg/networking/core/route/route.go translateAppendHeaders: OVERWRITE_IF_EXISTS_OR_ADD).
// The owner policy admits the ingress gateway for the user its user-id header names: a Notebook
// that sets kubeflow-userid to the namespace's owner lets every user who can log in reach it as
// the owner. kubeflow-edit may create Notebooks (kubeflow-notebooks-edit). (Review R9-3,
// docs/security/reviews.md.)
func TestNotebooksMayNotSetUserIDHeader(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := profileNamespace(t, s, "notebooks")
	member := crdMember(t, s, ns, notebookCRD(), "kubeflow.org/v1", "NotebookList", "guard-test-kubeflow-edit-notebooks", []rbacv1.PolicyRule{
		{APIGroups: []string{"kubeflow.org"}, Resources: []string{"notebooks"}, Verbs: []string{"create", "update", "patch", "delete"}}})
	require.Eventually(t, func() bool {
		err := member.Create(ctx, notebook(ns, "probe", `{"kubeflow-userid":"alice@example.com"}`), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.KubeflowPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the Kubeflow policy takes effect")

	for name, headers := range map[string]string{
		"the user-id header":                     `{"kubeflow-userid":"alice@example.com"}`,
		"the user-id header in capitals":         `{"Kubeflow-Userid":"alice@example.com"}`,
		"the user-id header with a JSON escape":  `{"kubeflow\u002duserid":"alice@example.com"}`,
		"the user-id header after RStudio's own": `{"X-RStudio-Root-Path":"/notebook/` + ns + `/lab/","kubeflow-userid":"alice@example.com"}`,
	} {
		err := member.Create(ctx, notebook(ns, objectName(name), headers), client.DryRunAll)
		t.Logf("%s: %v", name, err)
		if assert.Error(t, err, "%s: a Notebook whose route sets the header the owner policy trusts is admitted for a kubeflow-edit member", name) {
			assert.Contains(t, err.Error(), guard.KubeflowPolicy, "%s: refused, but not by the guard", name)
		}
	}
	// What the Jupyter web app sets for RStudio (spawner_ui_config.yaml), and no header at all.
	assert.NoError(t, member.Create(ctx, notebook(ns, "rstudio", `{"X-RStudio-Root-Path":"/notebook/`+ns+`/rstudio/"}`), client.DryRunAll))
	assert.NoError(t, member.Create(ctx, notebook(ns, "lab", ""), client.DryRunAll))
}
