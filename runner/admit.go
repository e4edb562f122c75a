package runner

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

// admitApply says whether Apply may go on for profile; when it may not, res says why. A missing
// namespace is admitted unless reserved: observe reports it as ErrNamespaceNotFound. A Profile
// without a UID is refused after admission: the objects' owner references need it.
func (r *Runner) admitApply(ctx context.Context, profile *profilev1.Profile, res *Result) bool {
	if err := r.admission(ctx, profile); err != nil {
		res.Errors = append(res.Errors, err)
		return false
	}
	if profile.UID == "" {
		res.Errors = append(res.Errors, fmt.Errorf("profile %q has no UID: pass the object read from the API server", profile.Name))
		return false
	}
	return true
}

// admitRevoke says whether Revoke may touch profile's namespace. A namespace that is not the
// Profile's holds nothing the Profile may take away, so the refusal is a warning, not an error:
// an error would keep the Profile's finalizer, and its deletion, waiting forever.
func (r *Runner) admitRevoke(ctx context.Context, profile *profilev1.Profile, res *Result) bool {
	err := r.admission(ctx, profile)
	if errors.Is(err, ownership.ErrNamespaceRefused) {
		for i := range res.Plugins {
			res.Plugins[i].Warnings = append(res.Plugins[i].Warnings, err.Error()+"; nothing revoked there")
		}
		return false
	}
	if err != nil {
		res.Errors = append(res.Errors, err)
		return false
	}
	return true
}

// admission reads the namespace and applies r.Namespaces to it. A reserved name is refused before
// any read, so a missing reserved namespace is refused too.
func (r *Runner) admission(ctx context.Context, profile *profilev1.Profile) error {
	if err := r.Namespaces.CheckReserved(profile); err != nil {
		return err
	}
	ns := &corev1.Namespace{}
	if err := r.reader().Get(ctx, client.ObjectKey{Name: profile.Name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading namespace %q: %w", profile.Name, err)
	}
	return r.Namespaces.Check(profile, ns)
}
