package guard

import (
	"path"
	"regexp"
	"testing"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// Every reserved pattern Validate accepts means the same to the runner (path.Match) and to the
// guard (the RE2 form of globRegexp), for every name: otherwise a namespace the runner manages
// could be one the guard takes for reserved, and guards nothing in (the careless-admin reviews of
// Dec 5: a reversed range, a malformed class after a '*'). All patterns of up to five characters
// over an alphabet with every pattern character, against all names of up to four characters.
func TestReservedPatternsMeanTheSameToTheRunnerAndTheGuard(t *testing.T) {
	t.Parallel()
	const alphabet, nameAlphabet = "ab9-*?[]^", "ab9-"
	names := words(nameAlphabet, 4)
	cfg := config.Default()
	accepted := 0
	for _, pat := range words(alphabet, 5) {
		if pat == "" {
			continue
		}
		cfg.Namespaces.Reserved = []string{pat}
		if cfg.Validate() != nil {
			continue
		}
		accepted++
		re, err := regexp.Compile(globRegexp(pat))
		if err != nil {
			t.Fatalf("Validate accepts %q, whose regular expression %q does not compile: %v", pat, globRegexp(pat), err)
		}
		for _, name := range names {
			runner, err := path.Match(pat, name)
			if err != nil {
				t.Fatalf("Validate accepts %q, which path.Match refuses for %q: %v", pat, name, err)
			}
			if guard := re.MatchString(name); runner != guard {
				t.Fatalf("pattern %q, name %q: the runner says reserved=%v, the guard %v", pat, name, runner, guard)
			}
		}
	}
	if accepted < 1000 {
		t.Fatalf("only %d patterns accepted: the test checks too little", accepted)
	}
}

// words are all strings over alphabet of at most n characters.
func words(alphabet string, n int) []string {
	out, level := []string{""}, []string{""}
	for i := 0; i < n; i++ {
		var next []string
		for _, w := range level {
			for _, c := range alphabet {
				next = append(next, w+string(c))
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}
