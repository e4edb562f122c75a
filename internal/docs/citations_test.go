package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
)

var (
	testFunc = regexp.MustCompile(`(?m)^func (Test[A-Z]\w*)\(`)
	// citedTest is a test named in prose or inline code: Test, then a capital letter.
	citedTest = regexp.MustCompile(`\bTest[A-Z]\w*`)
	// citedInPackage is "`pkg TestName`", the way the security pages cite a test and its package.
	citedInPackage = regexp.MustCompile("`([\\w./-]+) (Test[A-Z]\\w*)`")
)

// testsByName maps every test function of the module to the directories (relative to root,
// "." for the root package) that define it; the bin/ tree (fetched sources) is not the module's.
func testsByName(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
			if out[m[1]] == nil {
				out[m[1]] = map[string]bool{}
			}
			out[m[1]][filepath.ToSlash(dir)] = true
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// A test the documentation names outside a code block exists, and where a page names its package
// ("`guard TestName`", the root package as profileplugins) it is that package's: tests move and
// are renamed, and a page citing one that no longer exists promises what nothing checks.
func TestCitedTestsExist(t *testing.T) {
	root := golden.ModuleRoot(t)
	tests := testsByName(t, root)
	require.NotEmpty(t, tests)
	cited := 0
	for _, page := range docPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		body := prose(string(text))
		for _, name := range citedTest.FindAllString(body, -1) {
			cited++
			assert.NotEmpty(t, tests[name], "%s cites %s, which no package defines", page, name)
		}
		for _, m := range citedInPackage.FindAllStringSubmatch(body, -1) {
			pkg, name := m[1], m[2]
			if pkg == "profileplugins" {
				pkg = "."
			}
			if tests[name] != nil {
				assert.True(t, tests[name][pkg], "%s cites %s in %s; it is in %v", page, name, m[1], tests[name])
			}
		}
	}
	assert.NotZero(t, cited, "no page cites a test")
}
