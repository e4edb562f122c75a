// Package render is `profile-plugins render`: it prints, as multi-document YAML (or a JSON List
// with -o json), everything the plugins emit for one Profile, first the Namespace with exactly the
// labels the plugins own, then every object; or, with -cluster, the cluster-wide objects an admin
// applies once. It needs no cluster; with -kubeconfig it also runs the platform check against
// one and prints the findings on stderr, leaving stdout as it is.
package render
