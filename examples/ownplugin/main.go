// Command ownplugin runs a plugin of one's own with this module's runner. The plugin, contact,
// gives every user namespace a ConfigMap naming whom to contact about it (the Profile's owner) and
// the namespace label example.com/contact=listed, which it sets only while that ConfigMap stands.
// It runs against a fake API server, so it needs no cluster:
//
//	go run ./examples/ownplugin
//
// It applies twice for one Profile and prints each Result (the second writes nothing), then what
// the namespace holds. A plugin is three methods (package plugin): a name, the kinds it writes and
// a pure Generate; the runner does the writing, the ownership checks and the pruning. A fourth,
// optional, says what a controller's cache should hold of those kinds (plugin.CacheDeclarer):
// runner.CacheOptions(plugins...) assembles it into a manager's cache options.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// The contact plugin's names. The plugin name is also its field manager, so it never changes.
const (
	PluginName    = "contact"
	ConfigMapName = "team-contact"
	ListedLabel   = "example.com/contact"
)

// Contact is the plugin. It has no state: everything it decides on is in the Target.
type Contact struct{}

var (
	_ plugin.Plugin        = Contact{}
	_ plugin.CacheDeclarer = Contact{}
)

// Name implements plugin.Plugin.
func (Contact) Name() string { return PluginName }

// Kinds implements plugin.Plugin: the runner lists ConfigMaps to find this plugin's, and prunes
// one it made and no longer wants.
func (Contact) Kinds() []client.ObjectList { return []client.ObjectList{&corev1.ConfigMapList{}} }

// CacheByObject implements plugin.CacheDeclarer: the plugin reads no ConfigMap but its own, so a
// controller's cache (runner.CacheOptions) holds only the plugins' ConfigMaps, trimmed to what
// tells whose each is, and not every ConfigMap of the cluster. The runner reads the one it wants in
// full past the cache. A plugin run without a manager's cache needs no such method.
func (Contact) CacheByObject() map[client.Object]cache.ByObject { return plugin.OwnedConfigMaps() }

// Generate implements plugin.Plugin. The label requires the ConfigMap: the runner sets it only once
// the ConfigMap is written and intact, and takes it off when the ConfigMap is gone or another
// writer's, so whoever reads the label finds the contact.
func (Contact) Generate(t plugin.Target) (plugin.Desired, error) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: t.Namespace},
		Data:       map[string]string{"owner": t.Owner},
	}
	ref := plugin.Ref{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Name: ConfigMapName}
	return plugin.Desired{
		Objects:       []client.Object{cm},
		Labels:        map[string]string{ListedLabel: "listed"},
		LabelRequires: map[string][]plugin.Ref{ListedLabel: {ref}},
	}, nil
}

func main() {
	profile := &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: "alice", UID: "7d1c5e2a"},
		Spec:       profilev1.ProfileSpec{Owner: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice@example.com"}},
	}
	// The namespace as the profiles controller makes it: annotated with the owner. The runner writes
	// only into a namespace that is the Profile's (package ownership).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: profile.Name,
		Annotations: map[string]string{ownership.OwnerAnnotation: profile.Spec.Owner.Name}}}
	c := fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithReturnManagedFields().WithObjects(ns).Build()
	if err := run(context.Background(), c, profile, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ownplugin:", err)
		os.Exit(1)
	}
}

// run applies the contact plugin twice for profile through c and prints what happened.
func run(ctx context.Context, c client.Client, profile *profilev1.Profile, out io.Writer) error {
	r, err := runner.New(c, []plugin.Plugin{Contact{}})
	if err != nil {
		return err
	}
	for _, call := range []string{"first", "second"} {
		res := r.Apply(ctx, profile)
		if err := res.Err(); err != nil {
			return fmt.Errorf("%s apply: %w", call, err)
		}
		fmt.Fprintf(out, "%s apply: %s (changed: %t)\n", call, res, res.Changed())
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: profile.Name, Name: ConfigMapName}, cm); err != nil {
		return err
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: profile.Name}, ns); err != nil {
		return err
	}
	fmt.Fprintf(out, "ConfigMap %s/%s: owner=%s, managed by %s, plugin %s\n", cm.Namespace, cm.Name,
		cm.Data["owner"], cm.Labels[plugin.ManagedByLabel], cm.Labels[plugin.PluginLabel])
	fmt.Fprintf(out, "Namespace %s: %s=%s\n", ns.Name, ListedLabel, ns.Labels[ListedLabel])
	return nil
}
