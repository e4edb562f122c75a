package runner_test

import (
	"testing"

	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// TestMain stops the API server the cache tests share once the package's tests are done; without
// it every `go test ./runner` (and every mutant of `make mutate`) left a kube-apiserver and an
// etcd running.
func TestMain(m *testing.M) { envtest.Main(m) }
