// Package config is the one configuration document of every plugin in this module: its types,
// defaults, validation and loading.
//
// The document is versioned like Kubernetes component configuration:
//
//	apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1
//	kind: PluginConfig
//	mesh:
//	  mode: ambient
//
// The platform admin writes it; Profiles are user input and never widen it. [Parse] decodes
// strictly (an unknown field is an error naming its path), fills in the defaults documented on
// each field, and validates. Every error names the field path and the bad value.
package v1alpha1
