// Package plugins builds the module's full plugin set from a configuration, in the order the
// runner should run them. The examples share it; an importer writes the same few lines.
package plugins

import (
	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
	"github.com/kubeflow-ambient/profile-plugins/pss"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// New returns every plugin for a validated cfg: access policies first, then the mesh (whose
// enrolment labels wait for the access plugin's ztunnel policy), then Pod Security.
func New(cfg *config.Config) ([]plugin.Plugin, error) {
	podSecurity, err := pss.New(cfg)
	if err != nil {
		return nil, err
	}
	return []plugin.Plugin{authz.New(cfg), waypoint.New(cfg), podSecurity}, nil
}
