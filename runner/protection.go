package runner

import (
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// protections says, for each object a label may require, why it does not protect ("" when it does).
type protections struct {
	why map[plugin.Ref]string
	obs plugin.Observed
	// restored are the objects the object phase restored from another writer's change
	// (applyObject.restored).
	restored map[plugin.Ref]bool
	// rewritten are the status-gated objects the object phase changed (applyObject.rewritten).
	rewritten map[plugin.Ref]bool
}

// protection is the state of every object after the object phase. An object a plugin wants
// protects when it exists as desired: observed intact, written in this run, or an earlier version
// of the plugin's own that still stands after a failed update. An object of a plugin whose
// generation failed counts as what it is: it protects while it exists, carries the plugin's labels
// and holds no other writer's spec fields. A failed plugin therefore never takes enrolment down by
// itself.
func protection(plans []*planned, obs plugin.Observed) protections {
	pr := protections{why: map[plugin.Ref]string{}, obs: obs, restored: map[plugin.Ref]bool{}, rewritten: map[plugin.Ref]bool{}}
	for _, p := range plans {
		if !p.failed {
			for _, o := range p.objects {
				pr.why[o.ref] = o.broken
				if o.restored {
					pr.restored[o.ref] = true
				}
				if o.rewritten {
					pr.rewritten[o.ref] = true
				}
			}
			continue
		}
		for _, cur := range obs.Objects {
			if plugin.IsManagedBy(cur.GetLabels(), p.plugin.Name()) {
				pr.why[refOf(cur)] = asItIs(cur, p.plugin.Name())
			}
		}
	}
	return pr
}

// gaps lists the required objects that do not protect, each with the reason. An object no plugin
// generated in this call counts as unwanted.
func (pr protections) gaps(refs []plugin.Ref) []string {
	return pr.gapsOr(refs, pr.unwanted)
}

// gapsSoFar is gaps during the object phase: an object not written yet in this call counts as
// observed.
func (pr protections) gapsSoFar(refs []plugin.Ref) []string {
	return pr.gapsOr(refs, pr.asObserved)
}

// gapsOr lists the required objects that do not protect, each with the reason; unknown says why
// for an object the phases have not decided on.
func (pr protections) gapsOr(refs []plugin.Ref, unknown func(plugin.Ref) string) []string {
	var out []string
	for _, ref := range refs {
		why, known := pr.why[ref]
		if !known {
			why = unknown(ref)
		}
		if why != "" {
			out = append(out, ref.String()+" "+why)
		}
	}
	return out
}

// asObserved says why an observed object does not protect as it stands ("" when it does).
func (pr protections) asObserved(ref plugin.Ref) string {
	if cur := findObservedRef(pr.obs, ref); cur != nil {
		return asItIs(cur, cur.GetLabels()[plugin.PluginLabel])
	}
	return "does not exist"
}

// restoredNow lists the required objects restored from another writer's change in this call, and
// the status-gated ones changed in it (Desired.ReadyFromStatus): the same holds for both.
// Such an object is as desired, but what the data plane runs may still be the changed version:
// istiod programs a restored Gateway after the write, and the status the call observed is the
// changed version's. A routing label that requires one waits for the next call, whose observation
// shows the restored version (waypoint.Ready wants it Programmed for its new generation).
func (pr protections) restoredNow(refs []plugin.Ref) []string {
	var out []string
	for _, ref := range refs {
		switch {
		case pr.restored[ref]:
			out = append(out, ref.String()+" was restored from another writer's change in this call and may not be in effect yet")
		case pr.rewritten[ref]:
			out = append(out, ref.String()+" was changed in this call, so the status it was judged ready by is of the version before")
		}
	}
	return out
}

// unwanted says why an object that no plugin generated in this run does not protect.
func (pr protections) unwanted(ref plugin.Ref) string {
	cur := findObservedRef(pr.obs, ref)
	if cur == nil {
		return "does not exist"
	}
	if cur.GetLabels()[plugin.ManagedByLabel] != plugin.ManagedByValue {
		return "exists and was made by " + (&ConflictError{ManagedBy: managedBy(cur.GetLabels())}).who()
	}
	return "is no longer wanted by plugin " + cur.GetLabels()[plugin.PluginLabel]
}
