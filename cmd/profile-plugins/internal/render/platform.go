package render

import (
	"context"
	"fmt"
	"io"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/check"
	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// checkPlatform runs the platform check against the cluster of the kubeconfig (and context,
// when set) and writes its report to w, one line each, next to render's notes. It only reads the
// cluster; what render prints on stdout does not depend on it.
func checkPlatform(ctx context.Context, kubeconfig, kubeContext string, cfg *config.Config, w io.Writer) error {
	restCfg, err := cli.RESTConfig(kubeconfig, kubeContext)
	if err != nil {
		return fmt.Errorf("-kubeconfig %s: %w", kubeconfig, err)
	}
	report, err := check.Platform(ctx, restCfg, cfg)
	if err != nil {
		return fmt.Errorf("-kubeconfig %s: %w", kubeconfig, err)
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
