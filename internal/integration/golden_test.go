package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
)

func TestMain(m *testing.M) { envtest.Main(m) }

// Every object of every golden YAML file passes the real API server's validation (OpenAPI
// schemas and CEL rules of the Istio and Gateway API CRDs) as a server-side dry-run apply.
func TestGoldenFilesAreAcceptedByTheAPIServer(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(golden.Dir(t), "*", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	checked := 0
	for _, file := range files {
		rel, _ := filepath.Rel(golden.Dir(t), file)
		t.Run(rel, func(t *testing.T) {
			for i, obj := range readObjects(t, file) {
				ensureNamespace(t, env.Client, obj.GetNamespace())
				if obj.GetKind() == "Namespace" {
					ensureNamespace(t, env.Client, obj.GetName())
				}
				err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
					client.FieldOwner("golden-check"), client.ForceOwnership, client.DryRunAll)
				require.NoError(t, err, "document %d (%s %s/%s)", i+1, obj.GetKind(), obj.GetNamespace(), obj.GetName())
				checked++
			}
		})
	}
	t.Logf("%d objects from %d golden files accepted", checked, len(files))
}

// The CRDs are real: a policy with both a selector and targetRefs is refused by their CEL rule.
func TestTheCRDsEnforceIstiosRules(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	ensureNamespace(t, env.Client, "crd-check")
	bad := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(`apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: both, namespace: crd-check}
spec:
  selector: {matchLabels: {app: x}}
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: waypoint}]
`), &bad.Object))
	err := env.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(bad), client.FieldOwner("t"), client.DryRunAll)
	require.Error(t, err)
	require.Contains(t, err.Error(), "only one of targetRefs or selector can be set")
}

func readObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(doc, &u.Object), "%s", file)
		out = append(out, u)
	}
}

func stripComments(doc []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if name == "" {
		return
	}
	err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}
