package safety

import (
	"strings"
	"testing"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// TestFindings replays, as fixed sequences, the violations the state machine found (FINDINGS.md)
// and the events of issue 13's "Why", each checked by the same invariants after every step and
// every runner write. Each must pass once the runner is fixed; today they fail, naming the
// invariant that breaks.
func TestFindings(t *testing.T) {
	ambient := cfgModel{mode: config.ModeAmbient, enforce: baseline}
	// enrolled: the namespace is set up in ambient and runs a pod without a sidecar.
	enrolled := []step{reconcile, startPod(restricted, false), reconcile}
	for _, c := range []struct {
		name, finding string
		cfg           cfgModel
		initial       string // the enforce label before the runner first runs
		steps         []step
	}{
		{"an invalid owner edit unenrols the namespace", "F7", ambient, "",
			append(enrolled, editOwner("alice@example.com "), reconcile)},
		{"a foreign object holding the ztunnel policy's name unenrols the namespace", "F7", ambient, "",
			append(enrolled, deleteObject(ztunnelPolicy), createForeign(ztunnelPolicy), reconcile)},
		{"one failed write while re-creating the ztunnel policy unenrols the namespace", "F7", ambient, "",
			append(enrolled, deleteObject(ztunnelPolicy), failWrites(1, faultServer), reconcile)},
		{"use-waypoint while the owner policy is another writer's", "F8", ambient, "",
			// No waypoint is made while the owner policy is another writer's, so istiod has
			// nothing to program (waypoint.Plugin's waypointMayServe): reconciling twice is the sequence.
			[]step{createForeign(ownerPolicy), reconcile, reconcile}},
		{"action AUDIT on the ztunnel policy is never repaired", "F5", ambient, "",
			append(enrolled, drift("ztunnel action AUDIT"), reconcile)},
		{"a selector on the ztunnel policy is never repaired", "F5", ambient, "",
			append(enrolled, drift("ztunnel selector"), reconcile)},
		{"targetRefs on the ztunnel policy are never repaired", "F5", ambient, "",
			append(enrolled, drift("ztunnel targetRefs"), reconcile)},
		{"CUSTOM with a provider on the ztunnel policy is never repaired", "F5", ambient, "",
			append(enrolled, drift("ztunnel action CUSTOM with a provider"), reconcile)},
		{"action AUDIT on the owner policy keeps use-waypoint", "F5", ambient, "",
			[]step{reconcile, istiodSays(true), reconcile, drift("owner action AUDIT"), reconcile}},
		{"a GitOps tool's stricter enforce level is loosened", "F1", ambient, "",
			[]step{reconcile, gitopsSets(labelEnforce, "restricted"), reconcile}},
		{"the profiles controller's stricter enforce level is loosened", "F1", cfgModel{mode: config.ModeAmbient, enforce: privileged}, "baseline",
			[]step{reconcile}},
		{"preflight hold with no level yet leaves no enforce label", "F3", cfgModel{mode: config.ModeAmbient, enforce: restricted, hold: true}, "",
			[]step{startPod(baseline, false), reconcile}},
		{"revoke unenrols running pods", "F6", ambient, "",
			append(enrolled, revoke)},
		{"a switch to sidecar unenrols pods without a sidecar", "F6", ambient, "",
			append(enrolled, setMode(config.ModeSidecar), reconcile)},
		{"revoke deletes the ztunnel policy after failing to unenrol", "F4", ambient, "",
			append(enrolled, stopPods, failWrites(1, faultConflict), revoke)},
		{"revoke deletes the owner policy and the waypoint after failing to withdraw use-waypoint", "F4", ambient, "",
			[]step{reconcile, istiodSays(true), reconcile, failWrites(1, faultConflict), revoke}},
		{"a drifted ztunnel policy while the owner is invalid unenrols running pods", "F9", ambient, "",
			append(enrolled, drift("ztunnel selector"), editOwner("alice@example.com "), reconcile)},
		{"sidecar mode keeps a pod enrolled but does not re-create the deleted ztunnel policy", "F10", ambient, "",
			append(enrolled, setMode(config.ModeSidecar), reconcile, deleteObject(ztunnelPolicy), reconcile)},
		{"preflight hold keeps a level another writer loosened", "F11", cfgModel{mode: config.ModeAmbient, enforce: restricted, hold: true}, "",
			[]step{reconcile, gitopsSets(labelEnforce, "baseline"), startPod(baseline, false), reconcile}},
		{"a drifted owner policy keeps use-waypoint while the owner is invalid (targetRefs removed)", "F12", ambient, "",
			[]step{reconcile, istiodSays(true), reconcile, editOwner("alice@example.com "), drift("owner targetRefs removed"), reconcile}},
		{"a drifted owner policy keeps use-waypoint while the owner is invalid (action AUDIT)", "F12", ambient, "",
			[]step{reconcile, istiodSays(true), reconcile, editOwner("alice@example.com "), drift("owner action AUDIT"), reconcile}},
		{"a wildcard owner reaches the owner policy", "F2", ambient, "",
			[]step{reconcile, editOwner("*@example.com"), reconcile}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, c.cfg, c.initial, nil)
			for i, s := range c.steps {
				t.Logf("step %d: %s", i+1, s.name)
				if err := s.do(w); err != nil {
					t.Fatalf("step %d (%s): %v", i+1, s.name, err)
				}
				if len(w.violations) > 0 {
					t.Fatalf("%s (FINDINGS.md) after step %d (%s):\n  %s", c.finding, i+1, s.name, strings.Join(w.violations, "\n  "))
				}
			}
		})
	}
}

type step struct {
	name string
	do   func(*world) error
}

var (
	reconcile = step{"reconcile", func(w *world) error { w.reconcile(); return nil }}
	revoke    = step{"revoke", func(w *world) error { w.revoked = true; w.revoke(); return nil }}
	stopPods  = step{"every pod stops", func(w *world) error {
		for _, p := range w.snap().pods {
			w.podStop(p.name)
		}
		return nil
	}}
)

func startPod(shape int, sidecar bool) step {
	return step{"a pod starts", func(w *world) error { w.podStart(shape, sidecar); return nil }}
}

func editOwner(owner string) step {
	return step{"the owner becomes " + owner, func(w *world) error { w.owner = owner; return nil }}
}

func setMode(mode config.MeshMode) step {
	return step{"the admin sets mesh.mode " + string(mode), func(w *world) error { w.cfg.mode = mode; return nil }}
}

func deleteObject(name string) step {
	return step{"someone deletes " + name, func(w *world) error { return w.foreignDelete(name) }}
}

func createForeign(name string) step {
	return step{"gitops creates its own " + name, func(w *world) error { return w.foreignCreate(name) }}
}

func drift(what string) step {
	return step{"kubectl edit: " + what, func(w *world) error { return w.foreignDrift(what) }}
}

func failWrites(k int, kind faultKind) step {
	return step{"the next writes fail", func(w *world) error { w.failWrites(k, kind); return nil }}
}

func istiodSays(programmed bool) step {
	return step{"istiod reports the waypoint", func(w *world) error { return w.istiodReports(programmed) }}
}

func gitopsSets(key, value string) step {
	return step{"gitops sets " + key + "=" + value, func(w *world) error { w.gitopsSet(key, value); return nil }}
}
