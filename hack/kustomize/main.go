// Command kustomize builds a kustomization directory with sigs.k8s.io/kustomize/api's krusty, the
// library `kubectl kustomize` runs, and prints the YAML: the deploy/ tests and `make deploy-check`
// build every overlay with it, so neither CI nor an admin needs kubectl to check them. It is a
// module of its own so that the library's go.mod does not gain kustomize's dependencies.
//
//	go run . ../../deploy/overlays/beside-kubeflow
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kustomize DIR")
		os.Exit(2)
	}
	out, err := build(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "kustomize:", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(out)
}

// build runs kustomize on dir with the options of `kubectl kustomize` (load restrictions on: a
// kustomization reads no file outside its own tree except through another kustomization).
func build(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return res.AsYaml()
}
