package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// platformTimeout bounds the check's reads, so an unreachable cluster fails instead of hanging.
const platformTimeout = 30 * time.Second

// checkPlatform runs platform.Check against the cluster of the kubeconfig (and
// context, when set) and writes its report to w, one line each, next to render's notes. It only
// reads the cluster; what render prints on stdout does not depend on it.
func checkPlatform(kubeconfig, kubeContext string, cfg *config.Config, w io.Writer) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	restCfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return fmt.Errorf("-kubeconfig %s: %w", kubeconfig, err)
	}
	c, err := client.New(restCfg, client.Options{Scheme: runner.NewScheme()})
	if err != nil {
		return fmt.Errorf("-kubeconfig %s: %w", kubeconfig, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), platformTimeout)
	defer cancel()
	report, err := platform.Check(ctx, c, cfg)
	if err != nil {
		return fmt.Errorf("-kubeconfig %s: platform check: %w", kubeconfig, err)
	}
	if len(report.Findings) == 0 {
		_, err = fmt.Fprintln(w, "note: "+report.String())
		return err
	}
	for _, f := range report.Findings {
		if _, err := fmt.Fprintln(w, "platform: "+f.String()); err != nil {
			return err
		}
	}
	return nil
}
