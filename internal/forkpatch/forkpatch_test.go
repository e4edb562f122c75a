package forkpatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	istiosecurityv1beta1 "istio.io/client-go/pkg/apis/security/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/internal/forkpatch/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// block is `<!-- forkpatch:NAME -->`, then a ```go fence at the start of a line.
var block = regexp.MustCompile("(?s)<!-- forkpatch:([a-z-]+) -->\n```go\n(.*?)```\n")

// marker is a template line the README block of that name replaces.
var marker = regexp.MustCompile(`(?m)^//forkpatch:([a-z-]+)$`)

// The stand-in's files, and where the overlay puts them inside this module.
var templates = map[string]string{
	"profile_controller.go.tmpl": "fork/controllers/profile_controller.go",
	"main.go.tmpl":               "fork/main.go",
}

func readmeBlocks(t *testing.T, root string) map[string]string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks := map[string]string{}
	for _, m := range block.FindAllStringSubmatch(string(readme), -1) {
		require.NotContains(t, blocks, m[1], "README has two forkpatch:%s blocks", m[1])
		blocks[m[1]] = m[2]
	}
	require.NotEmpty(t, blocks, "README has no forkpatch blocks")
	return blocks
}

// The README's fork patch compiles, exactly as written, into the stand-in of the controller. The
// stand-in exists only in a build overlay, and builds from the module cache only (GOPROXY=off).
func TestReadmePatchCompiles(t *testing.T) {
	root := golden.ModuleRoot(t)
	blocks := readmeBlocks(t, root)
	used := map[string]bool{}
	replace := map[string]string{}
	dir := t.TempDir()
	for tmpl, target := range templates {
		src, err := os.ReadFile(filepath.Join("testdata", tmpl))
		require.NoError(t, err)
		out := marker.ReplaceAllStringFunc(string(src), func(line string) string {
			name := marker.FindStringSubmatch(line)[1]
			b, ok := blocks[name]
			if !assert.True(t, ok, "README has no forkpatch:%s block for %s", name, tmpl) {
				return line
			}
			used[name] = true
			return strings.TrimSuffix(b, "\n")
		})
		file := filepath.Join(dir, filepath.Base(target))
		require.NoError(t, os.WriteFile(file, []byte(out), 0o600))
		replace[filepath.Join(root, "internal", "forkpatch", target)] = file
	}
	for name := range blocks {
		assert.True(t, used[name], "README block forkpatch:%s has no place in the stand-in", name)
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	require.NoError(t, err)
	overlayFile := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(overlayFile, overlay, 0o600))

	cmd := exec.CommandContext(context.Background(), "go", "build", "-overlay", overlayFile, "-o", os.DevNull, "./internal/forkpatch/fork/...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS="+os.Getenv("GOFLAGS"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		var files []string
		for _, f := range replace {
			data, _ := os.ReadFile(f)
			files = append(files, f+":\n"+numbered(string(data)))
		}
		sort.Strings(files)
		t.Fatalf("the README's fork patch does not build:\n%s\n%s", out, strings.Join(files, "\n"))
	}
}

// The README shows only public packages: a fork cannot import examples/ or internal/.
func TestReadmeImportsOnlyPublicPackages(t *testing.T) {
	for name, b := range readmeBlocks(t, golden.ModuleRoot(t)) {
		for _, banned := range []string{"profile-plugins/examples", "profile-plugins/internal"} {
			assert.NotContains(t, b, banned, "forkpatch:%s", name)
		}
	}
}

// The fork's scheme, as its main.go builds it after the patch: the controller's own Profile,
// Istio security v1beta1 and Gateway API v1beta1, then the plugins' types. It must not panic, and
// every type the plugins write must map to exactly one kind, or the runner cannot apply it.
func TestForkSchemeServesThePlugins(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, profilev1.AddToScheme, istiosecurityv1beta1.AddToScheme,
		gatewayv1beta1.Install, profileplugins.AddToScheme,
	} {
		require.NoError(t, add(s))
	}
	for _, obj := range []client.Object{&gatewayv1.Gateway{}, &istiosecurityv1.AuthorizationPolicy{}, &corev1.ConfigMap{}, &corev1.Namespace{}, &rbacv1.RoleBinding{}} {
		_, err := apiutil.GVKForObject(obj, s)
		assert.NoError(t, err, "%T", obj)
	}

	c := fake.NewClientBuilder().WithScheme(s).WithReturnManagedFields().
		// The namespace as the controller creates it: annotated with its owner.
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alice", Annotations: map[string]string{"owner": "alice@example.com"}}}).Build()
	r, err := profileplugins.NewRunner(c, profileplugins.DefaultConfig())
	require.NoError(t, err)
	mesh := &kubeflow.Integration{Runner: r}
	instance := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "alice", UID: "u-1"}}
	instance.Spec.Owner = rbacv1.Subject{Kind: "User", Name: "alice@example.com"}
	res, err := mesh.Apply(context.Background(), instance)
	require.NoError(t, err, "the controller's own Profile type is accepted")
	assert.Equal(t, runner.DefaultWaitRequeue, res.RequeueAfter, "waiting for the waypoint")
	pol := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "alice", Name: "ns-owner-access-istio"}, pol))
	require.Len(t, pol.OwnerReferences, 1)
	assert.Equal(t, "u-1", string(pol.OwnerReferences[0].UID), "owned by the controller's Profile")
}

func numbered(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = fmt.Sprintf("%4d %s", i+1, lines[i])
	}
	return strings.Join(lines, "\n")
}
