package plan

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

func TestMain(m *testing.M) { envtest.Main(m) }

// rolloutConfig is the admin's move: adopt the owner policies kfam wrote, tighten enforce.
const rolloutConfig = `
authorization:
  adoptOwnerPolicy: true
podSecurity:
  enforce:
    level: restricted
`

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("apiVersion: "+config.APIVersion+"\nkind: "+config.Kind+"\n"+body), 0o600))
	fixture.Config(t, body) // fails here, with the field, if the body is invalid
	return path
}

// createProfile makes a Profile and its namespace as the profiles controller does: the Profile
// as controller owner and the owner annotation.
func createProfile(t *testing.T, c client.Client, name string, mutate ...func(*profilev1.Profile)) *profilev1.Profile {
	t.Helper()
	ctx := context.Background()
	p := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: profilev1.ProfileSpec{Owner: fixture.User(name + "@example.com")}}
	for _, m := range mutate {
		m(p)
	}
	require.NoError(t, c.Create(ctx, p))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{ownership.OwnerAnnotation: p.Spec.Owner.Name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: profilev1.GroupVersion.String(), Kind: profilev1.Kind,
			Name: p.Name, UID: p.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}}
	require.NoError(t, c.Create(ctx, ns, client.FieldOwner("profile-controller")))
	return p
}

// kfamOwnerPolicy is the owner policy as kfam writes it for sidecar mode: no selector, no
// targetRefs, and the user-id header rule (L7).
func kfamOwnerPolicy(namespace string) *istiosecurityv1.AuthorizationPolicy {
	return &istiosecurityv1.AuthorizationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "ns-owner-access-istio", Namespace: namespace},
		Spec: securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{{
			When: []*securityv1beta1.Condition{{Key: "request.headers[kubeflow-userid]", Values: []string{namespace + "@example.com"}}},
		}}},
	}
}

// privilegedPod is a running job that enforce restricted (and baseline) would not admit again.
func privilegedPod(namespace string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: namespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "train", Image: "trainer:1",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}},
	}
}

// labelAs sets a namespace label the way `kubectl label` does: an update under its own manager.
func labelAs(t *testing.T, c client.Client, namespace, manager, key, value string) {
	t.Helper()
	ns := &corev1.Namespace{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: namespace}, ns))
	patch := client.MergeFrom(ns.DeepCopy())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[key] = value
	require.NoError(t, c.Patch(context.Background(), ns, patch, client.FieldOwner(manager)))
}

// programWaypoint writes the status istiod writes once the waypoint is ready.
func programWaypoint(t *testing.T, c client.Client, namespace string) {
	t.Helper()
	gw := &gatewayv1.Gateway{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "waypoint"}, gw))
	now := metav1.Now()
	ip := gatewayv1.IPAddressType
	gw.Status.Conditions = []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: gw.Generation, LastTransitionTime: now},
		{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: gw.Generation, LastTransitionTime: now},
	}
	gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: &ip, Value: "10.96.10.10"}}
	require.NoError(t, c.Status().Update(context.Background(), gw))
}

// planOutput runs the command and returns its stdout and exit status.
func planOutput(t *testing.T, cfg *rest.Config, o options) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), cfg, o, &out, &errOut)
	if code == exitError {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), code
}

var (
	uidPattern  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	hashPattern = regexp.MustCompile(`desired-hash: [0-9a-f]{16}`)
)

// stable masks what differs between runs of the same test (UIDs, and the hashes that cover them).
func stable(s string) []byte {
	s = uidPattern.ReplaceAllString(s, "<uid>")
	return []byte(hashPattern.ReplaceAllString(s, "desired-hash: <hash>"))
}

// recorder remembers every request's method, path and dryRun parameter.
type recorder struct {
	mu       sync.Mutex
	requests []request
}

type request struct{ method, path, dryRun string }

func (r *recorder) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			r.mu.Lock()
			r.requests = append(r.requests, request{req.Method, req.URL.Path, req.URL.Query().Get("dryRun")})
			r.mu.Unlock()
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
