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

// marker is a template line the patch's block of that name replaces.
var marker = regexp.MustCompile(`(?m)^//forkpatch:([a-z-]+)$`)

// The stand-in's files, and where the overlay puts them inside this module.
var templates = map[string]string{
	"profile_controller.go.tmpl": "fork/controllers/profile_controller.go",
	"main.go.tmpl":               "fork/main.go",
}

// patchPage holds the complete patch; the README shows copies of some of its blocks.
const patchPage = "docs/fork.md"

// blocksOf returns the forkpatch blocks of one file of the module, by name.
func blocksOf(t *testing.T, root, file string) map[string]string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(root, file))
	require.NoError(t, err)
	blocks := map[string]string{}
	for _, m := range block.FindAllStringSubmatch(string(text), -1) {
		require.NotContains(t, blocks, m[1], "%s has two forkpatch:%s blocks", file, m[1])
		blocks[m[1]] = m[2]
	}
	return blocks
}

func patchBlocks(t *testing.T, root string) map[string]string {
	t.Helper()
	blocks := blocksOf(t, root, patchPage)
	require.NotEmpty(t, blocks, "%s has no forkpatch blocks", patchPage)
	return blocks
}

// The fork patch compiles, exactly as docs/fork.md writes it, into the stand-in of the controller.
// The stand-in exists only in a build overlay, and builds from the module cache only (GOPROXY=off).
func TestForkPatchCompiles(t *testing.T) {
	root := golden.ModuleRoot(t)
	blocks := patchBlocks(t, root)
	used := map[string]bool{}
	replace := map[string]string{}
	dir := t.TempDir()
	for tmpl, target := range templates {
		src, err := os.ReadFile(filepath.Join("testdata", tmpl))
		require.NoError(t, err)
		out := marker.ReplaceAllStringFunc(string(src), func(line string) string {
			name := marker.FindStringSubmatch(line)[1]
			b, ok := blocks[name]
			if !assert.True(t, ok, "%s has no forkpatch:%s block for %s", patchPage, name, tmpl) {
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
		assert.True(t, used[name], "%s block forkpatch:%s has no place in the stand-in", patchPage, name)
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
		t.Fatalf("the fork patch of %s does not build:\n%s\n%s", patchPage, out, strings.Join(files, "\n"))
	}
}

// The README shows the wiring in short with copies of some blocks; each must be the patch's own,
// byte for byte, so that what the README shows is what compiles.
func TestReadmeBlocksAreThePatchs(t *testing.T) {
	root := golden.ModuleRoot(t)
	patch := patchBlocks(t, root)
	readme := blocksOf(t, root, "README.md")
	require.NotEmpty(t, readme, "the README shows no forkpatch block")
	for name, b := range readme {
		want, ok := patch[name]
		if assert.True(t, ok, "README block forkpatch:%s is not in %s", name, patchPage) {
			assert.Equal(t, want, b, "README block forkpatch:%s differs from %s", name, patchPage)
		}
	}
}

// The patch shows only public packages: a fork cannot import cmd/, examples/ or internal/.
func TestForkPatchImportsOnlyPublicPackages(t *testing.T) {
	for name, b := range patchBlocks(t, golden.ModuleRoot(t)) {
		for _, banned := range []string{"profile-plugins/cmd", "profile-plugins/examples", "profile-plugins/internal"} {
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
