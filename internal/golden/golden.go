// Package golden compares generated output with files under the module's testdata/golden folder.
//
// Run the tests with -update (make update-golden) to rewrite the files from the current output,
// then read the diff before committing it: a golden file is a reviewed expectation, not a cache.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/pmezard/go-difflib/difflib"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden from the current output")

// Assert fails t unless got equals the golden file testdata/golden/<name>, printing a unified diff
// and the command that refreshes the file. With -update it writes got to the file instead.
func Assert(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join(Dir(t), filepath.FromSlash(name))
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file %s: %v\nCreate it with: make update-golden", name, err)
	}
	if bytes.Equal(want, got) {
		return
	}
	diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(want)), B: difflib.SplitLines(string(got)),
		FromFile: "testdata/golden/" + name + " (want)", ToFile: "generated (got)", Context: 3,
	})
	t.Errorf("output differs from golden file %s:\n%s\nIf the change is intended, refresh with: make update-golden (or go test ./... -run '%s' -update in this package), and read the diff before committing.",
		name, diff, t.Name())
}

// Dir returns the module's testdata/golden folder, found by walking up to go.mod.
func Dir(t testing.TB) string {
	t.Helper()
	return filepath.Join(ModuleRoot(t), "testdata", "golden")
}

// ModuleRoot returns the folder of the go.mod that encloses the test's working directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
