package forkpatch_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
)

// docPages are the pages whose links must resolve: the README, the root pages GitHub shows, every
// page under docs/ and docs/security/, and the state machine's findings.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{"README.md", "SECURITY.md", "BENCHMARKS.md"}
	for _, glob := range []string{"docs/*.md", "docs/security/*.md", "internal/safety/*.md"} {
		more, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(glob)))
		require.NoError(t, err)
		require.NotEmpty(t, more, "%s matches no page", glob)
		for _, p := range more {
			rel, err := filepath.Rel(root, p)
			require.NoError(t, err)
			pages = append(pages, filepath.ToSlash(rel))
		}
	}
	return pages
}

var (
	fence      = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```[^\\n]*$")
	inlineCode = regexp.MustCompile("`[^`\\n]*`")
	link       = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
)

// prose is a page without its code: neither links nor headings are read from code.
func prose(text string) string {
	return fence.ReplaceAllString(text, "")
}

// anchors returns the heading anchors GitHub makes of a page: lower case, only letters, digits,
// '-', '_' and spaces kept, spaces made '-', and a repeated anchor numbered.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(prose(text), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-', r == '_', unicode.IsLetter(r), unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func TestAnchorsAreGitHubs(t *testing.T) {
	got := anchors("# The waypoint's seccomp hardening\n## Once, for the cluster\n" +
		"## Layered waypoint policies (`ENABLE_LAYERED`)\n## `controllers/profile_controller.go`\n" +
		"```sh\n# not a heading\n```\n## Notes\n## Notes\n")
	assert.Equal(t, map[string]bool{
		"the-waypoints-seccomp-hardening": true, "once-for-the-cluster": true,
		"layered-waypoint-policies-enable_layered": true, "controllersprofile_controllergo": true,
		"notes": true, "notes-1": true,
	}, got)
}

// Every relative link of the documentation names a file of the module and, for a page, one of
// its headings: moving text between pages must not leave a link behind.
func TestDocLinksResolve(t *testing.T) {
	root := golden.ModuleRoot(t)
	checked := 0
	for _, page := range docPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		body := inlineCode.ReplaceAllString(prose(string(text)), "")
		for _, m := range link.FindAllStringSubmatch(body, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
				if _, err := os.Stat(filepath.Join(root, path)); !assert.NoError(t, err, "%s links to %s", page, target) {
					continue
				}
			}
			if anchor == "" {
				continue
			}
			linked, err := os.ReadFile(filepath.Join(root, path))
			require.NoError(t, err)
			assert.True(t, anchors(string(linked))[anchor], "%s links to %s: %s has no heading #%s", page, target, path, anchor)
		}
	}
	assert.NotZero(t, checked, "no relative link was checked")
}

// excerpt is `<!-- golden:PATH -->`, then a fenced block at the start of a line.
var excerpt = regexp.MustCompile("(?s)<!-- golden:([^ ]+) -->\n```[a-z]*\n(.*?)```\n")

// excerptMatches says whether every line of an excerpt is, in order, a line of the golden file:
// a line alone "…" stands for lines left out, and a line ending in "…" for one cut there.
func excerptMatches(quote, file string) (missing string, ok bool) {
	lines := strings.Split(file, "\n")
	i := 0
	for _, want := range strings.Split(strings.TrimSuffix(quote, "\n"), "\n") {
		if strings.TrimSpace(want) == "…" {
			continue
		}
		prefix, cut := strings.CutSuffix(want, "…")
		for ; i < len(lines); i++ {
			if lines[i] == want || cut && strings.HasPrefix(lines[i], prefix) {
				break
			}
		}
		if i == len(lines) {
			return want, false
		}
		i++
	}
	return "", true
}

func TestExcerptMatches(t *testing.T) {
	file := "a\nb long line\nc\nd\n"
	for quote, want := range map[string]bool{
		"a\n…\nd\n":        true,
		"b long …\nc\n":    true,
		"a\nc\nb long …\n": false, // out of order
		"b long\n":         false, // cut without saying so
		"e\n":              false,
	} {
		_, ok := excerptMatches(quote, file)
		assert.Equal(t, want, ok, "%q", quote)
	}
}

// An excerpt of a golden file in the documentation (the plan output in docs/plan.md) shows what the
// command prints today: when the golden changes, the excerpt must follow.
func TestGoldenExcerptsMatchTheirFiles(t *testing.T) {
	root := golden.ModuleRoot(t)
	found := 0
	for _, page := range docPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		for _, m := range excerpt.FindAllStringSubmatch(string(text), -1) {
			found++
			want, err := os.ReadFile(filepath.Join(root, m[1]))
			if !assert.NoError(t, err, "%s quotes %s", page, m[1]) {
				continue
			}
			line, ok := excerptMatches(m[2], string(want))
			assert.True(t, ok, "%s quotes %s, which has no line %q (after the ones before it)", page, m[1], line)
		}
	}
	assert.NotZero(t, found, "no golden excerpt in the documentation")
}
