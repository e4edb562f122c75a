package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDescribeForeign(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "an unnamed field manager set spec.x; gitops set spec.a, spec.b",
		describeForeign(map[string][]string{"gitops": {"spec.a", "spec.b"}, "": {"spec.x"}}))
}
