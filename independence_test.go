package profileplugins_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// everyListConfig gives every generated list at least one entry: sidecar callers with ports, L4
// exceptions with every kind of source, contributors, a revision, infrastructure labels.
const everyListConfig = `mesh:
  revision: canary
  waypoint: {labels: {team: ml}, annotations: {note: x}}
authorization:
  contributors: plugin
  userIdPrefix: "id:"
  platformCallers:
  - {name: pipelines-ui, principal: cluster.local/ns/kubeflow/sa/ml-pipeline-ui, onBehalfOfUser: true}
  - {name: activator, principal: cluster.local/ns/knative-serving/sa/activator, onBehalfOfUser: true}
  - {name: culler, principal: cluster.local/ns/kubeflow/sa/culler, methods: [GET], paths: ["*/api/kernels"], ports: [8888]}
  - {name: katib, principal: cluster.local/ns/kubeflow/sa/katib-controller, dataPlane: sidecar, ports: [6789, 6790]}
  l4Exceptions:
  - {namespaces: [monitoring, logging], ports: [9090, 15020]}
  - {principals: [corp.example/ns/backup/sa/velero]}
  - {serviceAccounts: [obs/otel]}
  - {ipBlocks: [10.8.0.0/24, 10.9.0.0/24], ports: [9091]}
`

// TestGeneratedObjectsAreIndependent: a controller may change what Generate returns (set labels,
// owner references, defaults, append to a list). That must change nothing else: not another
// object or field returned with it, not what a later Generate returns, not the configuration.
// Generation batches many small parts of a policy into a few allocations, so a part shared by
// mistake, or a list whose spare capacity is the next list's storage, would show here.
func TestGeneratedObjectsAreIndependent(t *testing.T) {
	for name, body := range map[string]string{
		"ambient default": "", "sidecar default": "mesh: {mode: sidecar}\n",
		"ambient every list": everyListConfig, "sidecar every list": "mesh:\n  mode: sidecar\n" + everyListConfig[len("mesh:\n"):],
	} {
		t.Run(name, func(t *testing.T) {
			cfg := fixture.Config(t, body)
			cfgBefore := snapshot(t, cfg)
			ps, err := plugins.New(cfg)
			require.NoError(t, err)
			target := independenceTarget(cfg)

			want := parts(t, ps, target)
			require.Greater(t, len(want), 3, "the test needs several objects and fields")
			for i := range want {
				got, names := generateAll(t, ps, target)
				scribble(reflect.ValueOf(got[i]).Elem())
				for j := range got {
					if j != i {
						assert.Equal(t, want[j], snapshot(t, got[j]), "changing %s changed %s", names[i], names[j])
					}
				}
			}
			again, _ := generateAll(t, ps, target)
			for _, p := range again {
				scribble(reflect.ValueOf(p).Elem())
			}
			assert.Equal(t, want, parts(t, ps, target), "changing the results of Generate changed what Generate returns next")
			assert.Equal(t, cfgBefore, snapshot(t, cfg), "changing the results of Generate changed the configuration")
		})
	}
}

func independenceTarget(cfg *config.Config) plugin.Target {
	ns := "kubeflow-user-example-com"
	binding := func(user, role string) client.Object {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: authz.ContributorPolicyName(user, role), Namespace: ns,
			Annotations: map[string]string{authz.UserAnnotation: user, authz.RoleAnnotation: role}}}
	}
	return plugin.Target{
		Namespace: ns, Owner: "user@example.com",
		Profile: &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: "u"}, Spec: profilev1.ProfileSpec{Owner: fixture.User("user@example.com")}},
		Observed: plugin.Observed{Objects: []client.Object{
			fixture.ProgrammedGateway(cfg, ns), binding("bob@example.com", authz.RoleEdit), binding("carol@example.com", authz.RoleView),
		}},
	}
}

// generateAll returns, for every plugin, a pointer to each object it generates and to each other
// field of its Desired (each list of requirements on its own), and their names.
func generateAll(t *testing.T, ps []plugin.Plugin, target plugin.Target) (out []any, names []string) {
	t.Helper()
	add := func(name string, p any) { out, names = append(out, p), append(names, name) }
	for _, p := range ps {
		d, err := p.Generate(target)
		require.NoError(t, err)
		for _, o := range d.Objects {
			add(fmt.Sprintf("%T %s", o, o.GetName()), o)
		}
		add(p.Name()+" labels", &d.Labels)
		add(p.Name()+" enrolment", &d.Enrolment)
		add(p.Name()+" adopt", &d.Adopt)
		add(p.Name()+" messages", &[][]string{d.Waiting, d.Warnings})
		add(p.Name()+" errors", &d.Errors)
		for _, k := range slices.Sorted(maps.Keys(d.LabelRequires)) {
			refs := d.LabelRequires[k]
			add(p.Name()+" requirements of label "+k, &refs)
		}
		for _, k := range slices.SortedFunc(maps.Keys(d.CreateRequires), func(a, b plugin.Ref) int { return strings.Compare(a.String(), b.String()) }) {
			refs := d.CreateRequires[k]
			add(p.Name()+" requirements of creating "+k.String(), &refs)
		}
	}
	return out, names
}

func parts(t *testing.T, ps []plugin.Plugin, target plugin.Target) []string {
	t.Helper()
	var out []string
	got, _ := generateAll(t, ps, target)
	for _, p := range got {
		out = append(out, snapshot(t, p))
	}
	return out
}

// snapshot is v as JSON (objects, the configuration), or as fmt prints it (the other fields of a
// Desired): both show every field and sort map keys.
func snapshot(t *testing.T, v any) string {
	t.Helper()
	switch v.(type) {
	case client.Object, *config.Config:
		out, err := json.Marshal(v)
		require.NoError(t, err)
		return fmt.Sprintf("%T %s", v, out)
	default:
		return fmt.Sprintf("%+v", reflect.ValueOf(v).Elem().Interface())
	}
}

// scribble changes every exported field it can reach from v: strings, numbers and booleans, every
// element and value, and appends to every slice, which writes into a slice's spare capacity.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
		if v.CanSet() && !v.IsNil() {
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		}
	case reflect.Array:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(v.MapIndex(k))
			scribble(val)
			v.SetMapIndex(k, val)
		}
		if v.Type().Key().Kind() == reflect.String && !v.IsNil() {
			v.SetMapIndex(reflect.ValueOf("scribbled").Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString("scribbled")
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.CanSet() {
			v.SetInt(v.Int() + 7)
		}
	}
}
