// Package kubeflow adapts this module to the Kubeflow profiles controller's plugin interface, so
// a fork of the controller can run the plugins from its reconciler with a few lines (see the
// README section "Wire it into the profiles controller").
//
// The controller's module cannot be imported here (it would pull its dependency versions into
// this module), so ProfileReconciler mirrors just what the adapter uses. In a fork, delete the
// mirror and use the controller's own type; the adapter's methods keep their shape.
package kubeflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/plugin/profilev1"
)

// ProfileReconciler mirrors the fields of the profiles controller's reconciler that the adapter
// reads: its client and logger.
type ProfileReconciler struct {
	client.Client
	Log logr.Logger
}

// Plugin is the profiles controller's plugin interface.
type Plugin interface {
	ApplyPlugin(*ProfileReconciler, *profilev1.Profile) error
	RevokePlugin(*ProfileReconciler, *profilev1.Profile) error
}

// ErrWaiting is returned by ApplyPlugin while a plugin waits (for the waypoint to be Programmed).
// The controller's Reconcile turns any plugin error into a requeue with backoff; a fork that
// also watches Gateways (Owns(&gatewayv1.Gateway{})) is reconciled as soon as the waypoint is
// ready instead.
var ErrWaiting = errors.New("waiting")

// MeshPlugins runs this module's plugins as one controller plugin.
type MeshPlugins struct {
	Runner *plugin.Runner
	// LastResult, if set, receives every Result, for a fork that writes the condition to the
	// Profile's status itself.
	LastResult func(*profilev1.Profile, *plugin.Result)
}

var _ Plugin = (*MeshPlugins)(nil)

// ApplyPlugin applies every plugin for the Profile. Warnings are logged; errors are returned; a
// plugin that waits returns ErrWaiting so the controller comes back.
func (m *MeshPlugins) ApplyPlugin(r *ProfileReconciler, p *profilev1.Profile) error {
	// The controller's plugin interface carries no context.
	res := m.Runner.Apply(context.TODO(), p)
	m.report(r, p, res)
	if err := res.Err(); err != nil {
		return err
	}
	if w := res.Waiting(); len(w) > 0 {
		return fmt.Errorf("%w: %s", ErrWaiting, w[0])
	}
	return nil
}

// RevokePlugin removes what the plugins made and the labels they own. It is idempotent.
func (m *MeshPlugins) RevokePlugin(r *ProfileReconciler, p *profilev1.Profile) error {
	res := m.Runner.Revoke(context.TODO(), p)
	m.report(r, p, res)
	return res.Err()
}

func (m *MeshPlugins) report(r *ProfileReconciler, p *profilev1.Profile, res *plugin.Result) {
	for _, w := range res.Warnings() {
		r.Log.Info("plugin warning", "profile", p.Name, "warning", w)
	}
	if res.Changed() {
		r.Log.Info("plugins applied", "profile", p.Name, "result", res.String())
	}
	if m.LastResult != nil {
		m.LastResult(p, res)
	}
}
