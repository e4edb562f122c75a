// Package profilev1 mirrors the Kubeflow profiles controller's kubeflow.org/v1 Profile API, so that
// this library can read Profiles without importing the controller's module (which would pull its
// dependency versions into every importer).
//
// Only the fields the controller's CRD defines are present. A Profile is user input: anyone who can
// register through the central dashboard can write one. [DecodePluginSpec] therefore decodes a
// spec.plugins entry strictly and names the field path of anything it does not know.
package profilev1
