package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that keeps failures instead of failing the real test.
type recorder struct {
	testing.TB
	errors []string
	fatal  bool
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, strings.TrimSpace(fmt.Sprintf(format, args...)))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatal = true
}
func (r *recorder) Helper() {}

func TestAssertPrintsADiffAndTheRefreshCommand(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "testdata", "golden", "x"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "testdata", "golden", "x", "a.yaml"), []byte("a: 1\nb: 2\n"), 0o644))
	t.Chdir(dir)

	r := &recorder{TB: t}
	Assert(r, "x/a.yaml", []byte("a: 1\nb: 2\n"))
	assert.Empty(t, r.errors, "equal content must pass")

	Assert(r, "x/a.yaml", []byte("a: 1\nb: 3\n"))
	require.Len(t, r.errors, 1)
	assert.Contains(t, r.errors[0], "-b: 2")
	assert.Contains(t, r.errors[0], "+b: 3")
	assert.Contains(t, r.errors[0], "make update-golden")

	r = &recorder{TB: t}
	Assert(r, "x/missing.yaml", []byte("a"))
	assert.True(t, r.fatal)
	assert.Contains(t, r.errors[0], "make update-golden")
}
