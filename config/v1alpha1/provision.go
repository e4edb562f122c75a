package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MinIdleAfter is the shortest idleAfter that is not a warning: below it a namespace whose only
// pod restarts can lose its waypoint in between, and the next request waits for a new one.
const MinIdleAfter = time.Minute

// OnDemand says whether the waypoint comes and goes with the namespace's endpoints: provision
// onDemand in ambient mode. Sidecar and none modes have no waypoint to provision.
func (m *Mesh) OnDemand() bool {
	return m.Mode == ModeAmbient && m.Waypoint.Provision == ProvisionOnDemand
}

// IgnoredServicesSelector is IgnoredServices as a selector; labels.Nothing() when unset. It
// assumes a validated configuration and answers Nothing for an invalid selector, so that an
// error never makes more Services count as idle than the admin asked for.
func (w *Waypoint) IgnoredServicesSelector() labels.Selector {
	if w.IgnoredServices == nil {
		return labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(w.IgnoredServices)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// IdleAfterDuration is IdleAfter, or its default when unset.
func (w *Waypoint) IdleAfterDuration() time.Duration {
	if w.IdleAfter == nil {
		return DefaultIdleAfter
	}
	return w.IdleAfter.Duration
}

func (w *Waypoint) validateProvision(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch w.Provision {
	case ProvisionAlways, ProvisionOnDemand:
	default:
		errs = append(errs, field.NotSupported(path.Child("provision"), w.Provision, []WaypointProvision{ProvisionAlways, ProvisionOnDemand}))
	}
	if w.IdleAfter != nil && w.IdleAfter.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("idleAfter"), w.IdleAfter.Duration.String(),
			"must be positive: with no time to wait, the waypoint would go between two pods of a rolling update"))
	}
	if s := w.IgnoredServices; s != nil {
		p := path.Child("ignoredServices")
		if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
			errs = append(errs, field.Invalid(p, s.String(), err.Error()))
		} else if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(p, s.String(),
				"an empty selector matches every Service, so no namespace would ever have a waypoint and every user would meet the "+
					"ztunnel policy alone; select the always-on Services by a label, or leave it unset"))
		}
	}
	return errs
}

// provisionWarnings are the allowed but doubtful provisioning settings.
func (m *Mesh) provisionWarnings() []string {
	w := m.Waypoint
	path := field.NewPath("mesh", "waypoint")
	var out []string
	if m.Waypoint.Provision == ProvisionOnDemand && m.Mode != ModeAmbient {
		out = append(out, path.Child("provision").String()+": onDemand has no effect in mesh.mode "+string(m.Mode)+": only ambient mode has waypoints")
	}
	if m.OnDemand() && w.IdleAfter != nil && w.IdleAfter.Duration < MinIdleAfter {
		out = append(out, path.Child("idleAfter").String()+": "+w.IdleAfter.Duration.String()+" is shorter than "+MinIdleAfter.String()+
			": a namespace whose only pod restarts can lose its waypoint in between, and its next request waits for a new one")
	}
	return out
}
