package runner

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// Rendering is what the plugins would write for one namespace if every write succeeded: a
// preview for admins and the input of golden files.
type Rendering struct {
	// Namespace carries exactly the labels the plugins own (after label gating).
	Namespace *unstructured.Unstructured
	// Objects are the decorated objects in plugin order, then generation order.
	Objects []*unstructured.Unstructured
	// Waiting, Warnings and Notes are the plugins' own, prefixed with the plugin's name.
	Waiting, Warnings, Notes []string
	// Errors are the plugins' Desired.Errors: what they refused while rendering a safe state.
	Errors []error
}

// Render generates t with every plugin, as Runner.Apply would, without an API server; a zero
// t.Observed.Now is the current time. An owner
// reference is added only when t.Profile has a UID. A plugin whose Generate fails fails the whole
// rendering; Desired.Errors (refusals answered with a safe state) are kept in Rendering.Errors.
func Render(s *runtime.Scheme, plugins []plugin.Plugin, t plugin.Target) (*Rendering, error) {
	if t.Observed.Now.IsZero() {
		t.Observed.Now = time.Now()
	}
	res := &Result{}
	for _, p := range plugins {
		res.Plugins = append(res.Plugins, PluginResult{Plugin: p.Name()})
	}
	plans := generateAll(s, plugins, res, t, nil, nil)
	for _, p := range plans {
		if p.failed {
			return nil, res.Err()
		}
	}
	out := &Rendering{Errors: res.errors()}
	for _, p := range plans {
		for _, o := range p.objects {
			out.Objects = append(out.Objects, &unstructured.Unstructured{Object: o.data})
		}
	}
	labels := map[string]string{}
	pr := protection(plans, t.Observed)
	for _, p := range plans {
		maps.Copy(labels, decideLabels(p, nil, pr, holds{}))
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(t.Namespace)
	if len(labels) > 0 {
		ns.SetLabels(labels)
	}
	out.Namespace = ns
	out.Waiting = res.Waiting()
	out.Warnings = res.Warnings()
	out.Notes = res.Notes()
	return out, nil
}

// EncodeYAML writes typed objects as one multi-document YAML stream in the same form as
// Rendering.YAML: apiVersion and kind from s, no status, no empty creationTimestamp.
func EncodeYAML(s *runtime.Scheme, objs ...client.Object) ([]byte, error) {
	r := &Rendering{}
	for _, o := range objs {
		u, err := cleanUnstructured(s, o)
		if err != nil {
			return nil, err
		}
		r.Objects = append(r.Objects, u)
	}
	return r.encode(r.Objects)
}

// YAML writes the namespace and then every object as one multi-document YAML stream, with keys
// sorted, so the same input always gives the same bytes.
func (r *Rendering) YAML() ([]byte, error) {
	return r.encode(append([]*unstructured.Unstructured{r.Namespace}, r.Objects...))
}

func (r *Rendering) encode(objs []*unstructured.Unstructured) ([]byte, error) {
	var buf bytes.Buffer
	for i, u := range objs {
		if u == nil {
			return nil, errors.New("rendering has no namespace")
		}
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(data)
	}
	return buf.Bytes(), nil
}
