package safety

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// The invariants, by when they must hold. Each has an ID that violations start with, so
// FINDINGS.md and -safety.skip can name it.
//
// After every write the runner makes, faulty call or not (a write may never make things worse;
// foreign writers, istiod and pods can, and the runner answers for those at its next reconcile):
//
//	W-COVER    no running pod that was in a data plane (a sidecar, or an ambient-enrolled
//	           namespace) leaves it. This is "once enrolled, no pod is ever outside both data
//	           planes", revoke included (issue 13: revoke and a switch to sidecar keep ambient
//	           enrolment while a pod without a sidecar runs).
//	W-ENROL    if "dataplane-mode=ambient ⇒ the managed ztunnel policy is present and intact" held
//	           before the write, it holds after it.
//	W-ROUTE    the same for "use-waypoint / ingress-use-waypoint ⇒ the managed owner policy
//	           attached to the waypoint, the ztunnel policy, and the managed waypoint Programmed,
//	           patched by no ConfigMap or only by the managed seccomp ConfigMap holding only the
//	           seccomp patch". Managed means the runner's label and the Profile as controller,
//	           never labels alone.
//	           Together with W-ENROL: the runner never sets or keeps a routing or enrolment label
//	           across a write that takes its protection away, and never sets one before it stands.
//	           For a routing label only another writer owns (before and after the write), the
//	           waypoint's Programmed condition is left out: the runner cannot take that label off
//	           before it rewrites its own waypoint, and the intact ztunnel policy refuses what is
//	           sent before istiod programs the new generation (the runner warns that the label was
//	           set by that writer without its protection standing).
//	W-STALE    no write changes the spec of the existing waypoint Gateway or the data of the
//	           existing seccomp ConfigMap while a routing label the runner owns stands: istiod has
//	           not programmed the version written, so the routing labels come off first (in an
//	           earlier write) and go on again only once it is Programmed at the new generation.
//	           W-ROUTE alone misses this where the Gateway was already not intact before the
//	           restoring write (another writer's change that istiod programmed).
//	W-ENFORCE  the enforce label is never removed (except by revoke), never loosened when another
//	           writer owns it (its stricter level is kept), and never loosened below the level
//	           the admin and the Profile want.
//	W-FOREIGN  no write changes or deletes a foreign object (one that is not the runner's: without
//	           its managed-by label, or with it but not controlled by the Profile, an impostor; the
//	           owner policy only when adoptOwnerPolicy allows it and it is no impostor), a namespace
//	           label outside the runner's keys, a pod, or anything in another namespace.
//	W-WILDCARD no managed policy compares the user-id header with a wildcard or empty value.
//
// After every reconcile in which no injected fault fired (the runner had its chance):
//
//	R-ENROL    in ambient mode the namespace is enrolled, so every pod without a sidecar is in
//	           ambient; excused only when the runner cannot have an intact ztunnel policy (a
//	           foreign object holds its name, or the Profile is invalid and the policy is missing
//	           or drifted, which the failed access plugin cannot repair).
//	R-ZTUNNEL  enrolled (in ambient mode, or by the runner's own label) ⇒ the managed ztunnel
//	           policy is present and intact; excused, if the Result reports an error, while a
//	           foreign object holds the name or the Profile is invalid (the access plugin cannot run).
//	R-ROUTE    a routing label the runner owns ⇒ its requirements, as in W-ROUTE, all intact.
//	           Routing labels only another writer set are that writer's business.
//	R-ENFORCE  the enforce label is present and at least the wanted level (the admin's, or the
//	           Profile's where allowed), except that preflight hold may keep the level last
//	           found legitimate while a running pod violates the wanted one. A level another
//	           writer loosened is not legitimate, so hold must not keep it.
//
// After every revoke in which no fault fired:
//
//	V-REVOKE   the runner's routing labels, owner policy, waypoint and seccomp ConfigMap are gone
//	           and the Result has no retryable error (the finalizer can go). The ztunnel policy
//	           and dataplane-mode may stay: with pods running they must (W-COVER, W-ENROL), and the
//	           namespace is Profile-controlled, so garbage collection takes them.
//
// At the fixed point (the Settle action: faults stop, three reconciles, then a fourth):
//
//	F-CONVERGE the fourth call writes nothing and has no retryable error.
//	F-LIVE     in ambient mode with a valid owner, intact policies, the managed seccomp patch and
//	           a Programmed managed waypoint, the namespace routes through it (use-waypoint and
//	           ingress-use-waypoint);
//	           in sidecar mode injection is on and the runner routes nothing to a waypoint.

// runnerKeys are the namespace labels the runner may write.
func runnerKey(k string) bool {
	switch k {
	case labelDataplane, labelUseWaypoint, labelIngress, labelInjection, labelRev, labelIdleSince:
		return true
	}
	return strings.HasPrefix(k, psaPrefix)
}

var routingLabels = []string{labelUseWaypoint, labelIngress}

// responsible: the runner answers for what a label requires when it owns the label, or in ambient
// mode, where it wants that label and its protection anyway. A foreign label in sidecar mode or
// during revoke is its writer's business.
func (w *world) responsible(s snapshot, key string) bool {
	return s.runnerOwns(key) || (w.cfg.mode == config.ModeAmbient && !w.revoked && w.inRunner != "revoke")
}

func enrolProblem(s snapshot) string {
	if s.labels[labelDataplane] != "ambient" {
		return ""
	}
	if p := s.ztunnelProblem(); p != "" {
		return "ztunnel policy " + p
	}
	return ""
}

// routeProblem says what a routing label lacks; owners are the owners an intact owner policy may name.
func routeProblem(s snapshot, key string, owners []string) string {
	return routeGap(s, key, owners, true)
}

// routeGap is routeProblem, with the waypoint's Programmed condition counted only if programmed.
func routeGap(s snapshot, key string, owners []string, programmed bool) string {
	if _, set := s.labels[key]; !set {
		return ""
	}
	var problems []string
	if p := s.ownerProblem(owners); p != "" {
		problems = append(problems, "owner policy "+p)
	}
	if p := s.ztunnelProblem(); p != "" {
		problems = append(problems, "ztunnel policy "+p)
	}
	name := s.labels[labelUseWaypoint]
	if key == labelIngress || name == "" {
		name = waypointName
	}
	check := s.waypointProtectionProblem
	if programmed {
		check = s.waypointProblem
	}
	if p := check(name); p != "" {
		problems = append(problems, p)
	}
	return strings.Join(problems, "; ")
}

func (w *world) ownerValid() bool { return slices.Contains(validOwners, w.owner) }

// acceptableOwners: the owner an intact owner policy names now; any earlier valid one while the
// Profile's owner is invalid (the runner must then keep what it had).
func (w *world) acceptableOwners() []string {
	if w.ownerValid() {
		return []string{w.owner}
	}
	// While the Profile's owner is refused, its policy may name no user at all ("") or, when the
	// runner could not write, still an earlier valid owner.
	return append(slices.Clone(validOwners), "")
}

// wantEnforce is the enforce level this Profile should have: the admin's, or the Profile's own
// choice when it is stricter, or looser and an override allows it (pod-security.md, config docs).
func (w *world) wantEnforce() int {
	admin := w.cfg.enforce
	i := slices.Index(levelNames, w.psRequest)
	switch {
	case i < 0:
		return admin
	case i >= admin, w.cfg.override:
		return i
	}
	return admin
}

func (w *world) violatingPods(s snapshot, level int) []string {
	var out []string
	for _, p := range s.pods {
		if p.strictest < level {
			out = append(out, p.name)
		}
	}
	return out
}

// checkWrite compares the state before and after one runner write.
func (w *world) checkWrite(what string, before, after snapshot) {
	at := "runner " + w.inRunner + ", write " + what + ": "
	for _, p := range after.pods {
		if before.covered(p) && !after.covered(p) {
			w.violate("W-COVER", "%spod %s has no sidecar and the namespace lost %s=ambient: it is outside both data planes",
				at, p.name, labelDataplane)
		}
	}
	if w.responsible(before, labelDataplane) || w.responsible(after, labelDataplane) {
		if enrolProblem(before) == "" {
			if p := enrolProblem(after); p != "" {
				w.violate("W-ENROL", "%snamespace is enrolled (%s=ambient) but its %s", at, labelDataplane, p)
			}
		}
	}
	for _, key := range routingLabels {
		if !w.responsible(before, key) && !w.responsible(after, key) {
			continue
		}
		// A write may move the owner policy from one valid owner to another, or to no user at all.
		owners := append(slices.Clone(validOwners), "")
		// Whether istiod has programmed the waypoint's newest generation is the business of whoever
		// set the routing label (W-STALE for the runner's own): the runner cannot take another
		// writer's label off, and its rewrite of its own waypoint must not wait on it. What it owes
		// a label it does not own is that no write takes the protection away; the ztunnel policy
		// admits only the waypoint, so traffic sent before istiod catches up is refused, not let in.
		programmed := before.runnerOwns(key) || after.runnerOwns(key)
		if routeGap(before, key, owners, programmed) == "" {
			if p := routeGap(after, key, owners, programmed); p != "" {
				w.violate("W-ROUTE", "%s%s=%s but: %s", at, key, after.labels[key], p)
			}
		}
	}
	if changed := staleningChange(before, after); changed != "" {
		for _, key := range routingLabels {
			if _, set := before.labels[key]; set && before.runnerOwns(key) {
				w.violate("W-STALE", "%s%s=%s, owned by the runner, stood while the write changed %s", at, key, before.labels[key], changed)
			}
		}
	}
	w.checkEnforceWrite(at, before, after)
	w.checkForeign(at, before, after)
	had := before.wildcardIdentities()
	for _, x := range after.wildcardIdentities() {
		if !slices.Contains(had, x) {
			w.violate("W-WILDCARD", "%smanaged policy admits a wildcard identity: %s", at, x)
		}
	}
}

func (w *world) checkEnforceWrite(at string, before, after snapshot) {
	if w.inRunner == "revoke" {
		return
	}
	bl, bset := before.enforceLevel()
	al, aset := after.enforceLevel()
	switch {
	case bset && !aset:
		w.violate("W-ENFORCE", "%sremoved %s=%s", at, labelEnforce, before.labels[labelEnforce])
	case bset && aset && al < bl && !before.onlyRunnerOwns(labelEnforce):
		w.violate("W-ENFORCE", "%sloosened %s from %s, set by %v, to %s", at, labelEnforce,
			before.labels[labelEnforce], before.labelOwners[labelEnforce], after.labels[labelEnforce])
	case bset && aset && al < bl && al < w.wantEnforce():
		w.violate("W-ENFORCE", "%sloosened %s from %s to %s, below the wanted %s", at, labelEnforce,
			before.labels[labelEnforce], after.labels[labelEnforce], levelNames[w.wantEnforce()])
	}
}

func (w *world) checkForeign(at string, before, after snapshot) {
	for _, k := range slices.Sorted(maps.Keys(before.versions)) {
		if after.versions[k] == before.versions[k] {
			continue
		}
		if k == "AuthorizationPolicy/"+userNS+"/"+ownerPolicy && w.cfg.adopt && w.inRunner == "reconcile" && !impostor(before.policies[ownerPolicy]) {
			continue // adoptOwnerPolicy: taking the old controller's owner policy over is allowed; one that copies the runner's labels never is
		}
		w.violate("W-FOREIGN", "%s%s is not the runner's, yet the write changed or deleted it", at, k)
	}
	keys := slices.Sorted(maps.Keys(before.labels))
	for k := range after.labels {
		if _, ok := before.labels[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		bv, bok := before.labels[k]
		av, aok := after.labels[k]
		if !runnerKey(k) && (bv != av || bok != aok) {
			w.violate("W-FOREIGN", "%snamespace label %s changed from %q to %q, but it is not the runner's", at, k, bv, av)
		}
	}
}

// checkReconciled runs after a reconcile in which no fault fired.
func (w *world) checkReconciled(res *runner.Result, s snapshot) {
	ambient := w.cfg.mode == config.ModeAmbient
	zt := s.policies[ztunnelPolicy]
	ztunnelForeign := zt != nil && !managedByPlugin(zt, "authz")
	if ambient && s.labels[labelDataplane] != "ambient" {
		// With an invalid Profile the access plugin cannot run, so a ztunnel policy that is missing
		// or drifted cannot be repaired; an empty namespace may then stay or become unenrolled.
		// Pods that were covered stay covered all the same (W-COVER).
		excused := ztunnelForeign || (!w.ownerValid() && s.ztunnelProblem() != "")
		if !excused {
			w.violate("R-ENROL", "ambient mode, yet after a fault-free reconcile the namespace is not enrolled (%s=%q); pods outside both data planes: %v",
				labelDataplane, s.labels[labelDataplane], w.uncovered(s))
		}
	}
	if s.labels[labelDataplane] == "ambient" && (ambient || s.runnerOwns(labelDataplane)) {
		if p := s.ztunnelProblem(); p != "" {
			excused := (ztunnelForeign || !w.ownerValid()) && res.Err() != nil
			if !excused {
				w.violate("R-ZTUNNEL", "after a fault-free reconcile the namespace is enrolled (%s=ambient, owners %v) but its ztunnel policy is %s",
					labelDataplane, s.labelOwners[labelDataplane], p)
			}
		}
	}
	for _, key := range routingLabels {
		if !s.runnerOwns(key) {
			continue
		}
		if p := routeProblem(s, key, w.acceptableOwners()); p != "" {
			w.violate("R-ROUTE", "after a fault-free reconcile the runner's %s=%s routes to what is not protected: %s", key, s.labels[key], p)
		}
	}
	w.checkEnforceReconciled(s)
}

func (w *world) uncovered(s snapshot) []string {
	var out []string
	for _, p := range s.pods {
		if !s.covered(p) {
			out = append(out, p.name)
		}
	}
	return out
}

func (w *world) checkEnforceReconciled(s snapshot) {
	want := w.wantEnforce()
	level, set := s.enforceLevel()
	value := s.labels[labelEnforce]
	switch {
	case !set:
		w.violate("R-ENFORCE", "after a fault-free reconcile the namespace has no %s label (want %s; preflight hold %t; pods violating it: %v)",
			labelEnforce, levelNames[want], w.cfg.hold, w.violatingPods(s, want))
	case level >= want:
		w.sanctioned = value
	case w.cfg.hold && value == w.sanctioned && len(w.violatingPods(s, want)) > 0:
		// preflight hold keeps the legitimate level while running pods violate the wanted one.
	default:
		w.violate("R-ENFORCE", "after a fault-free reconcile %s=%s (owners %v) is looser than the wanted %s (admin %s, profile asks %q, preflight hold %t, last legitimate level %q, violating pods %v)",
			labelEnforce, value, s.labelOwners[labelEnforce], levelNames[want], levelNames[w.cfg.enforce], w.psRequest, w.cfg.hold,
			w.sanctioned, w.violatingPods(s, want))
	}
}

// sanctionWritten runs after a reconcile in which a fault fired: a level at least as strict
// as the wanted one that the runner still wrote is legitimate, and preflight hold may keep it
// once the admin tightens the wanted level.
func (w *world) sanctionWritten(s snapshot) {
	if level, set := s.enforceLevel(); set && level >= w.wantEnforce() {
		w.sanctioned = s.labels[labelEnforce]
	}
}

// checkRevoked runs after a revoke in which no fault fired.
func (w *world) checkRevoked(res *runner.Result, s snapshot) {
	for _, key := range routingLabels {
		if s.runnerOwns(key) {
			w.violate("V-REVOKE", "after a fault-free revoke the runner still owns %s=%s", key, s.labels[key])
		}
	}
	if p := s.policies[ownerPolicy]; p != nil && managedByPlugin(p, "authz") && !s.handed["AuthorizationPolicy/"+ownerPolicy] &&
		(len(p.Spec.TargetRefs) > 0 || !s.sidecarPodRuns()) {
		// A selector-less owner policy stays while a pod with a sidecar runs: it is that pod's
		// only ALLOW policy (plugin.PodProtector).
		w.violate("V-REVOKE", "after a fault-free revoke the managed owner policy is still there")
	}
	if g := s.gateways[waypointName]; g != nil && managedByPlugin(g, "waypoint") && !s.handed["Gateway/"+waypointName] {
		w.violate("V-REVOKE", "after a fault-free revoke the managed waypoint is still there")
	}
	if c := s.configMaps[seccompCM]; c != nil && managedByPlugin(c, "waypoint") && !s.handed["ConfigMap/"+seccompCM] {
		w.violate("V-REVOKE", "after a fault-free revoke the managed seccomp ConfigMap is still there")
	}
	if res.Retryable() {
		w.violate("V-REVOKE", "a fault-free revoke returned a retryable error, so the finalizer would stay: %v", res.Err())
	}
}

// checkFixedPoint runs after the fourth fault-free call of Settle.
func (w *world) checkFixedPoint(res *runner.Result) {
	if len(w.writes) > 0 {
		w.violate("F-CONVERGE", "the fourth fault-free %s still wrote: %v", map[bool]string{true: "revoke", false: "reconcile"}[w.revoked], w.writes)
	}
	if res.Retryable() {
		w.violate("F-CONVERGE", "the fourth fault-free call still fails with a retryable error: %v", res.Err())
	}
	if w.revoked {
		return
	}
	s := w.snap()
	switch w.cfg.mode {
	case config.ModeAmbient:
		wp := s.gateways[waypointName]
		ready := wp != nil && s.waypointProblem(waypointName) == "" && s.patchProblem() == "" &&
			s.ztunnelProblem() == "" && s.ownerProblem(w.acceptableOwners()) == ""
		if ready && (s.labels[labelUseWaypoint] != waypointName || s.labels[labelIngress] != "true") {
			w.violate("F-LIVE", "at the fixed point everything a waypoint needs stands, yet %s=%q and %s=%q",
				labelUseWaypoint, s.labels[labelUseWaypoint], labelIngress, s.labels[labelIngress])
		}
		// Injection goes off only once the namespace is in ambient: while ambient enrolment is
		// withheld, a sidecar namespace keeps injection on so new pods never start in no data plane.
		if s.labels[labelDataplane] == "ambient" && s.labels[labelInjection] != "disabled" {
			w.violate("F-LIVE", "ambient mode at the fixed point, yet %s=%q", labelInjection, s.labels[labelInjection])
		}
	case config.ModeSidecar:
		if s.labels[labelInjection] != "enabled" {
			w.violate("F-LIVE", "sidecar mode at the fixed point, yet %s=%q", labelInjection, s.labels[labelInjection])
		}
		for _, key := range routingLabels {
			if s.runnerOwns(key) {
				w.violate("F-LIVE", "sidecar mode at the fixed point, yet the runner routes %s=%s", key, s.labels[key])
			}
		}
	}
}

// sidecarPodRuns says whether a pod with an istio-proxy container runs in the namespace.
func (s snapshot) sidecarPodRuns() bool {
	for _, p := range s.pods {
		if p.sidecar {
			return true
		}
	}
	return false
}

// staleningChange names what a write changed of the objects istiod programs the waypoint from, as
// they existed before it ("" when nothing): the spec of the waypoint Gateway, the data of the
// seccomp ConfigMap. Creating and deleting are left to W-ROUTE.
func staleningChange(before, after snapshot) string {
	var changed []string
	if b, a := before.gateways[waypointName], after.gateways[waypointName]; b != nil && a != nil && !reflect.DeepEqual(b.Spec, a.Spec) {
		changed = append(changed, "the spec of Gateway "+waypointName)
	}
	if b, a := before.configMaps[seccompCM], after.configMaps[seccompCM]; b != nil && a != nil &&
		(!reflect.DeepEqual(b.Data, a.Data) || !reflect.DeepEqual(b.BinaryData, a.BinaryData)) {
		changed = append(changed, "the data of ConfigMap "+seccompCM)
	}
	return strings.Join(changed, " and ")
}
