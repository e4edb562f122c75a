package safety

import (
	"errors"
	"flag"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"pgregory.net/rapid"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

var skipInvariants = flag.String("safety.skip", "",
	"comma-separated invariant IDs (W-COVER, R-ENFORCE, ...) not to check; for triage only, to find the next distinct violation")

var ownerChoices = flag.String("safety.owners", "",
	"owners, separated by '|', the Profile may name (default: every valid and invalid one); for triage only, to look past a finding about owners")

// owners the EditOwner action draws from.
func owners() []string {
	if *ownerChoices != "" {
		return strings.Split(*ownerChoices, "|")
	}
	return append(slices.Clone(validOwners), invalidOwners...)
}

// defaultChecks is how many sequences `go test` runs; `make fuzz` asks for 10,000.
const defaultChecks = "200"

// defaultSeed fixes the sequences of the short run, so `make test` gives the same verdict on the
// same commit and a red CI run is a change's doing, not the dice's. Asking for a number of checks
// (`make fuzz`, -rapid.checks, RAPID_CHECKS) or a seed draws new sequences from a random seed.
const defaultSeed = "20261201"

func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	_, checksEnv := os.LookupEnv("RAPID_CHECKS")
	_, seedEnv := os.LookupEnv("RAPID_SEED")
	if !set["rapid.checks"] && !checksEnv {
		must(flag.Set("rapid.checks", defaultChecks))
		if !set["rapid.seed"] && !seedEnv {
			must(flag.Set("rapid.seed", defaultSeed))
		}
	}
	os.Exit(m.Run())
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// TestRunnerSafety drives the runner with the full plugin set through random sequences of events
// and checks the invariants listed in invariants_test.go after every step and every runner write.
func TestRunnerSafety(t *testing.T) {
	skip := map[string]bool{}
	for _, id := range strings.Split(*skipInvariants, ",") {
		if id = strings.TrimSpace(id); id != "" {
			skip[id] = true
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		cfg := cfgModel{
			mode:     rapid.SampledFrom([]config.MeshMode{config.ModeAmbient, config.ModeSidecar}).Draw(t, "initial mesh mode"),
			enforce:  rapid.IntRange(privileged, restricted).Draw(t, "initial admin enforce level (0 privileged, 1 baseline, 2 restricted)"),
			hold:     rapid.Bool().Draw(t, "initial preflight hold"),
			wired:    rapid.Bool().Draw(t, "reads through a managed-only, trimming ConfigMap cache and an API reader"),
			onDemand: rapid.Bool().Draw(t, "initial mesh.waypoint.provision onDemand"),
		}
		initial := rapid.SampledFrom([]string{"", "baseline"}).Draw(t, "enforce label before the runner first runs")
		w := newWorld(t, cfg, initial, skip)
		t.Logf("start: %s; namespace %s enforce label %q", cfg, userNS, initial)
		t.Repeat(rapid.StateMachineActions(&machine{w}))
	})
	// A passing long run (make fuzz) must have reached the states the invariants are about. The
	// short run only logs the counts: routing through a Programmed waypoint happens in a few
	// percent of the sequences, so 200 of them could miss it by chance, and a test that fails by
	// chance is a flaky one.
	checks, _ := strconv.Atoi(flag.Lookup("rapid.checks").Value.String())
	for _, state := range []string{stateRouted, stateBareAmbient, stateSidecarKeepsAmbient, stateRevokedWithPods,
		stateFaultFired, stateForeignName, stateHeld, stateImpostor, stateIdle} {
		t.Logf("%6d runner calls ended with: %s", reached[state], state)
		if checks >= 1000 && len(skip) == 0 {
			if reached[state] == 0 {
				t.Errorf("no sequence reached the state %q: the generator no longer exercises it", state)
			}
		}
	}
}

// machine's exported methods are the actions; rapid names each step after its method.
type machine struct{ w *world }

// Check reports what the step broke; the writes' own checks ran during the step.
func (m *machine) Check(t *rapid.T) {
	if len(m.w.violations) > 0 {
		t.Fatalf("invariant violated:\n  %s", strings.Join(m.w.violations, "\n  "))
	}
}

func (m *machine) skipIfRevoked(t *rapid.T) {
	if m.w.revoked {
		t.Skip("the Profile is being deleted: the controller no longer reconciles or edits it")
	}
}

// --- the controller ---

func (m *machine) Reconcile(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.reconcile()
}

// rarely lets an action through one time in n, so actions that end or clutter a sequence (revoke,
// foreign objects under managed names) leave room for the others. It shrinks to "let through".
func rarely(t *rapid.T, n int) {
	if rapid.IntRange(0, n-1).Draw(t, "rare action") != 0 {
		t.Skip("not this time")
	}
}

func (m *machine) Revoke(t *rapid.T) {
	rarely(t, 4)
	m.w.revoked = true
	m.w.revoke()
}

func (m *machine) Settle(t *rapid.T) {
	m.w.settle()
}

// --- the Profile's author ---

func (m *machine) EditOwner(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.owner = rapid.SampledFrom(owners()).Draw(t, "owner")
}

func (m *machine) RequestPodSecurity(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.psRequest = rapid.SampledFrom([]string{"", "privileged", "baseline", "restricted", "superuser"}).
		Draw(t, "spec.plugins PodSecurity enforce (\"\" removes the entry)")
}

// --- the admin ---

func (m *machine) SetMeshMode(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.mode = rapid.SampledFrom([]config.MeshMode{config.ModeAmbient, config.ModeSidecar}).Draw(t, "mesh mode")
}

func (m *machine) SetEnforce(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.enforce = rapid.IntRange(privileged, restricted).Draw(t, "admin enforce level (0 privileged, 1 baseline, 2 restricted)")
}

func (m *machine) SetPreflight(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.hold = rapid.Bool().Draw(t, "preflight hold")
}

func (m *machine) SetAdoptOwnerPolicy(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.adopt = rapid.Bool().Draw(t, "adoptOwnerPolicy")
}

func (m *machine) SetOverride(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.override = rapid.Bool().Draw(t, "override lets alice choose down to privileged")
}

func (m *machine) SetProvision(t *rapid.T) {
	m.skipIfRevoked(t)
	m.w.cfg.onDemand = rapid.Bool().Draw(t, "mesh.waypoint.provision onDemand (false: always)")
}

// --- the namespace's workloads and time (provision onDemand) ---

// EndpointsAppear is a pod of a Service starting, as the EndpointSlice controller reports it; the
// waypoint's own Service's endpoints must never count.
func (m *machine) EndpointsAppear(t *rapid.T) {
	svc := rapid.SampledFrom([]string{"notebook", waypointName}).Draw(t, "Service whose endpoint appears")
	skipIf(t, m.w.endpoints(svc, rapid.IntRange(1, 2).Draw(t, "endpoints"), rapid.Bool().Draw(t, "ready")))
}

// EndpointsGo is the notebook culled: its endpoints terminate, go, or the slice is deleted.
func (m *machine) EndpointsGo(t *rapid.T) {
	how := rapid.SampledFrom([]string{"terminating", "none", "deleted"}).Draw(t, "how the endpoints go")
	skipIf(t, m.w.endpointsGo("notebook", how))
}

// TimePasses moves the runner's clock: within the idle window, just past it, or far past it.
func (m *machine) TimePasses(t *rapid.T) {
	m.w.clock = m.w.clock.Add(rapid.SampledFrom([]time.Duration{time.Minute, idleAfter - time.Minute, idleAfter + time.Minute, 3 * time.Hour}).
		Draw(t, "time passes"))
}

// --- foreign writers ---

func (m *machine) ForeignCreate(t *rapid.T) {
	rarely(t, 3)
	which := rapid.SampledFrom([]string{ztunnelPolicy, ownerPolicy, waypointName, seccompCM}).Draw(t, "object gitops creates first")
	skipIf(t, m.w.foreignCreate(which))
}

func (m *machine) ForeignDelete(t *rapid.T) {
	which := rapid.SampledFrom([]string{ztunnelPolicy, ownerPolicy, waypointName, seccompCM}).Draw(t, "object someone deletes")
	skipIf(t, m.w.foreignDelete(which))
}

func (m *machine) ForeignDrift(t *rapid.T) {
	skipIf(t, m.w.foreignDrift(rapid.SampledFrom(drifts).Draw(t, "drift")))
}

func (m *machine) GitopsSetLabel(t *rapid.T) {
	k, v, _ := strings.Cut(rapid.SampledFrom(gitopsLabelChoices).Draw(t, "label gitops sets"), "=")
	m.w.gitopsSet(k, v)
}

func (m *machine) GitopsDropLabel(t *rapid.T) {
	if len(m.w.gitopsLabels) == 0 {
		t.Skip("gitops applies no label")
	}
	skipIf(t, m.w.gitopsDrop(rapid.SampledFrom(slices.Sorted(maps.Keys(m.w.gitopsLabels))).Draw(t, "label gitops stops applying")))
}

func (m *machine) KubectlRemoveLabel(t *rapid.T) {
	skipIf(t, m.w.kubectlRemove(rapid.SampledFrom([]string{labelDataplane, labelUseWaypoint, labelIngress, labelEnforce}).Draw(t, "label kubectl removes")))
}

// --- the API server ---

func (m *machine) FailWrites(t *rapid.T) {
	k := rapid.IntRange(1, 3).Draw(t, "how many of the runner's next writes fail")
	m.w.failWrites(k, rapid.SampledFrom([]faultKind{faultServer, faultConflict, faultLostReply}).Draw(t, "fault"))
}

func (m *machine) FailRead(t *rapid.T) {
	m.w.readFaults++
}

// --- istiod ---

func (m *machine) Istiod(t *rapid.T) {
	// istiod mostly succeeds: a waypoint that is never Programmed leaves routing unexercised.
	skipIf(t, m.w.istiodReports(rapid.SampledFrom([]bool{true, true, true, false}).Draw(t, "waypoint Programmed")))
}

// --- pods ---

func (m *machine) PodStart(t *rapid.T) {
	shape := rapid.IntRange(privileged, restricted).Draw(t, "strictest level the pod passes (0 privileged, 1 baseline, 2 restricted)")
	sidecar := false
	if m.w.snap().injects() == nil {
		sidecar = rapid.Bool().Draw(t, "sidecar (no injection label: a pod that asked for one)")
	}
	m.w.podStart(shape, sidecar)
}

func (m *machine) PodStop(t *rapid.T) {
	s := m.w.snap()
	if len(s.pods) == 0 {
		t.Skip("no pods")
	}
	names := make([]string, len(s.pods))
	for i, p := range s.pods {
		names[i] = p.name
	}
	m.w.podStop(rapid.SampledFrom(names).Draw(t, "pod that stops"))
}

// skipIf discards a foreign actor's step that does not apply: the world says so
// (errNotApplicable), or the object it would change is gone (an EndpointSlice the controller
// took away). Any other error of the step is the world's own bug, and a skip would hide it by
// silently shrinking what the sequences cover, so the sequence fails.
func skipIf(t *rapid.T, err error) {
	switch {
	case err == nil:
	case errors.Is(err, errNotApplicable), apierrors.IsNotFound(err):
		t.Skip(err.Error())
	default:
		t.Fatalf("a foreign actor's step failed unexpectedly: %v", err)
	}
}
