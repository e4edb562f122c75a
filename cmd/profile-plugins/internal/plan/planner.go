package plan

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/runner/dryrun"
)

// planner makes the plan of each Profile through the library's runner in dry-run mode.
type planner struct {
	c      client.Client
	runner *runner.Runner
	cfg    *config.Config
	pss    *pss.Plugin
	diff   bool
}

func newPlanner(restCfg *rest.Config, cfg *config.Config, diff bool) (*planner, error) {
	s := runner.NewScheme()
	if err := profilev1.AddToScheme(s); err != nil {
		return nil, err
	}
	c, err := client.New(restCfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	r, err := plugins.NewRunner(c, cfg)
	if err != nil {
		return nil, err
	}
	podSecurity, err := pss.New(cfg)
	if err != nil {
		return nil, err
	}
	return &planner{c: c, runner: r, cfg: cfg, pss: podSecurity, diff: diff}, nil
}

// plan plans the named Profiles, or every Profile when names is empty, parallel at a time. The
// runner is safe for concurrent use on different Profiles; the report keeps the Profiles' order.
func (p *planner) plan(ctx context.Context, names []string, parallel int, bar *progress) (*Report, error) {
	profiles, err := p.profiles(ctx, names)
	if err != nil {
		return nil, err
	}
	report := &Report{SchemaVersion: SchemaVersion, Namespaces: make([]NamespacePlan, len(profiles))}
	bar.start(len(profiles))
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range profiles {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			report.Namespaces[i] = p.planOne(ctx, &profiles[i])
			bar.step(profiles[i].Name)
		})
	}
	wg.Wait()
	bar.done()
	platform, err := platform.Check(ctx, p.c, p.cfg)
	if err != nil {
		return nil, fmt.Errorf("platform check: %w", err)
	}
	report.Platform = platform.Findings
	report.summarize()
	return report, nil
}

func (p *planner) profiles(ctx context.Context, names []string) ([]profilev1.Profile, error) {
	if len(names) == 0 {
		list := &profilev1.ProfileList{}
		if err := p.c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing Profiles: %w", err)
		}
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
		return list.Items, nil
	}
	out := make([]profilev1.Profile, 0, len(names))
	for _, name := range names {
		pr := profilev1.Profile{}
		if err := p.c.Get(ctx, client.ObjectKey{Name: name}, &pr); err != nil {
			return nil, fmt.Errorf("-profiles: Profile %q: %w", name, err)
		}
		out = append(out, pr)
	}
	return out, nil
}

// planOne dry-runs Apply for one Profile and reads what the plan needs besides.
func (p *planner) planOne(ctx context.Context, profile *profilev1.Profile) NamespacePlan {
	n := NamespacePlan{Namespace: profile.Name, Profile: profile.Name}
	res := newDryRun(dryrun.Apply(ctx, p.runner, profile))
	missing := classifyErrors(&n, res)
	if !missing {
		n.Objects = objectChanges(res, p.diff)
		n.Labels = labelChanges(res)
		n.Conflicts = append(n.Conflicts, secondWriters(res, n.Labels)...)
		p.observe(ctx, &n, res)
	}
	n.Waiting = append(n.Waiting, pluginFindings(res, func(r runner.PluginResult) []string { return r.Waiting })...)
	n.Warnings = append(n.Warnings, warnings(res)...)
	n.Notes = append(n.Notes, pluginFindings(res, func(r runner.PluginResult) []string { return r.Notes })...)
	sortFindings(n.Conflicts, n.Refusals, n.Violations, n.Waiting, n.Warnings, n.Notes, n.Errors)
	n.Status = n.status()
	return n
}

// observe adds what the plan reads beyond the runner's result: violating pods and readiness (in
// sidecar mode, the pods whose init containers run before their sidecar).
func (p *planner) observe(ctx context.Context, n *NamespacePlan, res *dryRun) {
	if p.cfg.Mesh.Mode == config.ModeSidecar {
		pods := &corev1.PodList{}
		if err := p.c.List(ctx, pods, client.InNamespace(n.Namespace)); err != nil {
			n.Errors = append(n.Errors, Finding{Message: fmt.Sprintf("listing pods: %v", err)})
		} else {
			n.Readiness = initContainerFindings(pods.Items, p.cfg.Mesh.Waypoint.Name)
		}
	}
	if before, after, ok := enforceChange(res); ok {
		pods := &corev1.PodList{}
		if err := p.c.List(ctx, pods, client.InNamespace(n.Namespace)); err != nil {
			n.Errors = append(n.Errors, Finding{Message: fmt.Sprintf("listing pods: %v", err)})
		} else {
			for _, v := range p.pss.Violations(pods.Items, after) {
				n.Violations = append(n.Violations, Finding{Plugin: pss.PluginName,
					Message: fmt.Sprintf("pod %s: rejected by enforce %q (now %q) if created again", v, after.Level, before.Level)})
			}
		}
	}
	if p.cfg.Mesh.Mode != config.ModeAmbient {
		return
	}
	findings, err := readiness(ctx, p.c, p.cfg, n.Namespace, rewritten(n.Objects))
	if err != nil {
		n.Errors = append(n.Errors, Finding{Message: err.Error()})
	}
	n.Readiness = findings
}

// classifyErrors sorts the Result's errors into conflicts, refusals and errors. It reports
// whether the namespace does not exist yet, which is no error: the profiles controller creates it.
func classifyErrors(n *NamespacePlan, res *dryRun) (missing bool) {
	for _, err := range res.Errors {
		if errors.Is(err, runner.ErrNamespaceNotFound) {
			n.Waiting = append(n.Waiting, Finding{Message: fmt.Sprintf("namespace %s does not exist yet: the profiles controller creates it, and the plugins apply then", n.Namespace)})
			missing = true
			continue
		}
		addError(n, "", err)
	}
	for _, r := range res.Plugins {
		for _, err := range r.Errors {
			addError(n, r.Plugin, err)
		}
	}
	return missing
}

func addError(n *NamespacePlan, pluginName string, err error) {
	f := Finding{Plugin: pluginName, Message: err.Error()}
	var conflict *runner.ConflictError
	switch {
	case errors.As(err, &conflict):
		n.Conflicts = append(n.Conflicts, f)
	case errors.Is(err, plugin.ErrInput):
		n.Refusals = append(n.Refusals, f)
	case dryRunUnsupported(err):
		// Not an answer about the real write: the plan of this namespace is incomplete.
		f.Message += " (the webhook's sideEffects forbid dry runs, so the plan cannot preview this write; a real apply would call it)"
		n.Errors = append(n.Errors, f)
	case rejected(err):
		f.Message = "the API server rejects it: " + f.Message
		n.Refusals = append(n.Refusals, f)
	default:
		n.Errors = append(n.Errors, f)
	}
}

func pluginFindings(res *dryRun, get func(runner.PluginResult) []string) []Finding {
	var out []Finding
	for _, r := range res.Plugins {
		for _, m := range get(r) {
			out = append(out, Finding{Plugin: r.Plugin, Message: m})
		}
	}
	return out
}

func sortFindings(lists ...[]Finding) {
	for _, l := range lists {
		sort.SliceStable(l, func(i, j int) bool {
			if l[i].Plugin != l[j].Plugin {
				return l[i].Plugin < l[j].Plugin
			}
			return l[i].Message < l[j].Message
		})
	}
}

// dryRun is a dry-run Result with the writes the run would have made.
type dryRun struct {
	*runner.Result
	DryRun []dryrun.Write
}

func newDryRun(res *runner.Result, writes []dryrun.Write) *dryRun {
	return &dryRun{Result: res, DryRun: writes}
}
