package pss

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

const (
	// PluginName is the plugin's name: its field manager and the value of plugin.PluginLabel.
	PluginName = "pss"
	// ProfileKind is the spec.plugins kind a Profile uses to choose its levels.
	ProfileKind = "PodSecurity"
)

// ProfileSpec is what a Profile may ask for; every field is optional.
type ProfileSpec struct {
	Enforce psaapi.Level `json:"enforce,omitempty"`
	Audit   psaapi.Level `json:"audit,omitempty"`
	Warn    psaapi.Level `json:"warn,omitempty"`
}

// Plugin is the Pod Security plugin. Create it with New.
type Plugin struct {
	cfg  *config.Config
	eval policy.Evaluator
}

var (
	_ plugin.Plugin      = (*Plugin)(nil)
	_ plugin.PodObserver = (*Plugin)(nil)
	_ plugin.PodDemand   = (*Plugin)(nil)
)

// New returns the plugin for a validated configuration.
func New(cfg *config.Config) (*Plugin, error) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("pod security evaluator: %w", err)
	}
	return &Plugin{cfg: cfg, eval: eval}, nil
}

// Name implements plugin.Plugin.
func (p *Plugin) Name() string { return PluginName }

// Kinds implements plugin.Plugin: the plugin writes only namespace labels.
func (p *Plugin) Kinds() []client.ObjectList { return nil }

// NeedsPods implements plugin.PodObserver: the preflight evaluates the running pods.
func (p *Plugin) NeedsPods() bool { return true }

// NeedsPodsFor implements plugin.PodDemand: the pods decide only whether preflight hold keeps the
// namespace's enforce label, so they are needed when hold is configured, the namespace has an
// enforce label to keep, and the level d sets is stricter (without pods the preflight finds no
// violation, so d holds the level wanted before any hold). Otherwise the preflight's report is a
// warning, and the API server gives that warning itself when the label is written: on an update
// that makes enforce stricter, Pod Security admission evaluates the namespace's pods and answers
// "existing pods in namespace ... violate the new PodSecurity enforce level" with one warning per
// violation (k8s.io/pod-security-admission admission/admission.go, ValidateNamespace and
// EvaluatePodsInNamespace), which reaches the Result (runner.WithWarnings).
func (p *Plugin) NeedsPodsFor(t plugin.Target, d plugin.Desired) bool {
	if p.cfg.PodSecurity.Preflight != config.PreflightHold {
		return false
	}
	if _, set := t.Observed.Labels[psaapi.EnforceLevelLabel]; !set {
		return false // hold keeps an existing label only (see preflight)
	}
	next, err := psaapi.ParseLevel(d.Labels[psaapi.EnforceLevelLabel])
	if err != nil {
		return true // not the plugin's own output; let the preflight see the pods
	}
	return psaapi.CompareLevels(next, currentEnforce(t.Observed.Labels).Level) > 0
}

// Generate implements plugin.Plugin.
func (p *Plugin) Generate(t plugin.Target) (plugin.Desired, error) {
	ps := p.cfg.PodSecurity
	want := map[string]config.LevelVersion{"enforce": ps.Enforce, "audit": ps.Audit, "warn": ps.Warn}
	var d plugin.Desired

	// Most Profiles ask for nothing: skip decoding (and its allocation) when they have no plugins.
	if t.Profile != nil && len(t.Profile.Spec.Plugins) > 0 {
		errs := p.profileChoice(t, want)
		d.Errors = append(d.Errors, errs...)
	}
	for _, m := range modes {
		lv, kept := keepStricter(t.Observed, m, want[m.name])
		want[m.name] = lv
		if kept != "" {
			d.Warnings = append(d.Warnings, kept)
		}
	}

	enforce := want["enforce"]
	if held, report := p.preflight(t, enforce); report != "" {
		if held != nil {
			enforce = *held
			d.Waiting = append(d.Waiting, report)
		} else {
			d.Warnings = append(d.Warnings, report)
		}
	}
	want["enforce"] = enforce
	// Every mode is always labelled: a missing enforce label means privileged, so the plugin
	// never drops one it set, and Revoke leaves them too (see AdmissionLabels).
	d.Labels = map[string]string{}
	for _, m := range modes {
		d.Labels[m.levelLabel] = string(want[m.name].Level)
		d.Labels[m.versionLabel] = want[m.name].Version
	}
	return d, nil
}

// profileChoice applies what the Profile asks for to want, where the configuration allows it,
// and returns one error per refused request.
func (p *Plugin) profileChoice(t plugin.Target, want map[string]config.LevelVersion) []error {
	var spec ProfileSpec
	found, err := profilev1.DecodePluginSpec(t.Profile, ProfileKind, &spec)
	if err != nil {
		return []error{fmt.Errorf("%w; the admin's levels apply", err)}
	}
	if !found {
		return nil
	}
	base := field.NewPath("spec", "plugins").Index(pluginIndex(t.Profile)).Child("spec")
	var errs []error
	refuse := func(path *field.Path, asked psaapi.Level, why string) {
		errs = append(errs, fmt.Errorf("profile %q: %s: level %q refused: %s", t.Profile.Name, path, asked, why))
	}
	for _, c := range []struct {
		name  string
		asked psaapi.Level
	}{{"enforce", spec.Enforce}, {"audit", spec.Audit}, {"warn", spec.Warn}} {
		if c.asked == "" {
			continue
		}
		path := base.Child(c.name)
		asked, err := psaapi.ParseLevel(string(c.asked))
		if err != nil {
			refuse(path, c.asked, "must be privileged, baseline or restricted")
			continue
		}
		admin := want[c.name]
		if why := p.refusal(t, c.name, asked, admin.Level); why != "" {
			refuse(path, c.asked, why)
			continue
		}
		want[c.name] = config.LevelVersion{Level: asked, Version: admin.Version}
	}
	return errs
}

// refusal says why the configuration refuses the level a Profile asks for in mode, or "" when it
// allows it: any mode may be tightened where the mesh can run at the new level, and only enforce
// may be loosened, down to what a matching podSecurity.overrides entry allows.
func (p *Plugin) refusal(t plugin.Target, mode string, asked, admin psaapi.Level) string {
	if psaapi.CompareLevels(asked, admin) >= 0 {
		return p.tighteningRefusal(mode, asked, admin)
	}
	if mode != "enforce" {
		return fmt.Sprintf("%s may be tightened but never loosened below the admin's %q", mode, admin)
	}
	min, ok := p.loosestAllowed(t)
	if !ok {
		return fmt.Sprintf("looser than the admin's %q and no podSecurity.overrides entry matches this profile; enforce stays %s", admin, admin)
	}
	if psaapi.CompareLevels(asked, min) < 0 {
		return fmt.Sprintf("podSecurity.overrides allow this profile down to %q only; enforce stays %s", min, admin)
	}
	return ""
}

// tighteningRefusal says why an enforce level at least as strict as the admin's would stop the
// mesh's own pods from starting, or "".
func (p *Plugin) tighteningRefusal(mode string, asked, admin psaapi.Level) string {
	if mode != "enforce" {
		return ""
	}
	if asked != psaapi.LevelPrivileged && p.cfg.Mesh.Mode == config.ModeSidecar && !*p.cfg.Mesh.IstioCNI {
		return "sidecar injection without istio-cni needs NET_ADMIN and NET_RAW, which this level forbids; enforce stays " + string(admin)
	}
	// Restricted is not refused in ambient mode without mesh.waypoint.seccompPatch: the waypoint
	// class defaults in mesh.istiodNamespace (waypoint.ClassDefaults) give the waypoint pod its
	// seccompProfile. Whether they exist is a fact of the cluster, which a plugin cannot read; the
	// waypoint plugin's waiting message names them while the waypoint is not Programmed.
	return ""
}

// loosestAllowed is the loosest enforce level any matching override grants the target.
func (p *Plugin) loosestAllowed(t plugin.Target) (psaapi.Level, bool) {
	var allowed []psaapi.Level
	for _, o := range p.cfg.PodSecurity.Overrides {
		if matches(o, t) {
			allowed = append(allowed, o.MinimumEnforce)
		}
	}
	if len(allowed) == 0 {
		return "", false
	}
	return slices.MinFunc(allowed, psaapi.CompareLevels), true
}

// matches reads the namespace's labels only. Profile names never match, even in a configuration
// that skipped Validate: the user chose the name (see config.PodSecurityOverride).
func matches(o config.PodSecurityOverride, t plugin.Target) bool {
	if o.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(o.NamespaceSelector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(t.Observed.Labels)) {
			return true
		}
	}
	return false
}

func pluginIndex(p *profilev1.Profile) int {
	for i, pl := range p.Spec.Plugins {
		if pl.Kind == ProfileKind {
			return i
		}
	}
	return -1
}

// preflight evaluates the running pods when enforce gets stricter than the namespace has now.
// It returns a report when pods would violate the new level, and, with preflight hold, the level
// to keep instead. Hold keeps an existing enforce label only: a namespace without one (every new
// namespace) gets the new level at once, since holding "no label" would hold it at privileged.
func (p *Plugin) preflight(t plugin.Target, next config.LevelVersion) (*config.LevelVersion, string) {
	current := currentEnforce(t.Observed.Labels)
	if psaapi.CompareLevels(next.Level, current.Level) <= 0 {
		return nil, ""
	}
	violations := p.Violations(t.Observed.Pods, next)
	if len(violations) == 0 {
		return nil, ""
	}
	msg := fmt.Sprintf("tightening enforce from %q to %q: %d running pod(s) violate it and keep running, but could not be created again: %s",
		current.Level, next.Level, len(violations), strings.Join(violations, "; "))
	if p.cfg.PodSecurity.Preflight != config.PreflightHold {
		return nil, msg
	}
	if _, set := t.Observed.Labels[psaapi.EnforceLevelLabel]; !set {
		return nil, "podSecurity.preflight: hold keeps an existing enforce level only, and this namespace had none; " + msg
	}
	if by := loosenedBy(t.Observed); len(by) > 0 {
		return nil, fmt.Sprintf("podSecurity.preflight: hold keeps only a level the plugin set or found at its first run, and %s changed this one; %s",
			strings.Join(by, ", "), msg)
	}
	held := current
	return &held, fmt.Sprintf("holding enforce at %q (podSecurity.preflight: hold) until the pods comply; %s", current.Level, msg)
}

// currentEnforce reads the namespace's enforce level with Pod Security's own label parser, so it
// agrees with the API server: missing means privileged at latest, an invalid level restricted.
func currentEnforce(nsLabels map[string]string) config.LevelVersion {
	defaults := psaapi.Policy{Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()}}
	policy, _ := psaapi.PolicyToEvaluate(nsLabels, defaults)
	return config.LevelVersion{Level: policy.Enforce.Level, Version: policy.Enforce.Version.String()}
}

// Violations evaluates pods at lv with Pod Security's own checks and describes each violating pod
// as "name (what it violates)", sorted by name. Pods that have finished are skipped.
func (p *Plugin) Violations(pods []corev1.Pod, lv config.LevelVersion) []string {
	version, err := psaapi.ParseVersion(lv.Version)
	if err != nil {
		version = psaapi.LatestVersion()
	}
	level := psaapi.LevelVersion{Level: lv.Level, Version: version}
	var out []string
	for i := range pods {
		pod := &pods[i]
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		res := policy.AggregateCheckResults(p.eval.EvaluatePod(level, &pod.ObjectMeta, &pod.Spec))
		if !res.Allowed {
			out = append(out, fmt.Sprintf("%s (%s)", pod.Name, res.ForbiddenDetail()))
		}
	}
	sort.Strings(out)
	return out
}

// loosenedBy names the other writers of the enforce label when the plugin has managed the
// namespace's Pod Security labels before but no longer owns that value: another writer replaced
// the plugin's level. Holding such a level would keep a loosening for as long as one violating
// pod runs. A level found before the plugin's first run (the profiles controller's, at rollout) is
// not reported: holding it is what preflight hold is for.
func loosenedBy(obs plugin.Observed) []string {
	mine := plugin.FieldManager(PluginName)
	if slices.Contains(obs.LabelManagers[psaapi.EnforceLevelLabel], mine) {
		return nil
	}
	for _, key := range []string{psaapi.AuditLevelLabel, psaapi.WarnLevelLabel, psaapi.EnforceVersionLabel} {
		if slices.Contains(obs.LabelManagers[key], mine) {
			return slices.DeleteFunc(slices.Clone(obs.LabelManagers[psaapi.EnforceLevelLabel]), func(m string) bool { return m == mine })
		}
	}
	return nil
}
