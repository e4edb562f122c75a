package proc

import (
	"maps"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// counter counts a process's requests by verb, telling a Get from a List, and remembers which
// resources its informers watch.
type counter struct {
	mu      sync.Mutex
	counts  map[string]int
	writes  map[string]int // "PATCH namespaces": writes by verb and resource
	watches []string
	seen    map[string]bool
}

func countRequests(cfg *rest.Config) (*rest.Config, *counter) {
	c := &counter{counts: map[string]int{}, writes: map[string]int{}, seen: map[string]bool{}}
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, c: c} }
	return cfg, c
}

type countingTransport struct {
	next http.RoundTripper
	c    *counter
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.c.record(r)
	return t.next.RoundTrip(r)
}

func (c *counter) record(r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Method != http.MethodGet {
		c.counts[r.Method]++
		c.writes[r.Method+" "+kindOf(r.URL.Path)]++
		return
	}
	q := r.URL.Query()
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		// An informer's watch: what it watches, not a read of any pass.
		res := resourceOf(r.URL.Path)
		if strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata") {
			res += " (metadata)"
		}
		if sel := q.Get("labelSelector"); sel != "" {
			res += " [" + sel + "]"
		}
		if !c.seen[res] {
			c.seen[res] = true
			c.watches = append(c.watches, res)
		}
		return
	}
	if isList(r.URL.Path) {
		c.counts["LIST"]++
		return
	}
	c.counts["GET"]++
}

// resourceOf turns /api/v1/pods or /apis/security.istio.io/v1/authorizationpolicies into
// "pods" or "authorizationpolicies.security.istio.io"; a namespaced path keeps its namespace.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	group := ""
	switch {
	case parts[0] == "apis" && len(parts) > 3:
		group, parts = parts[1], parts[3:]
	case parts[0] == "api" && len(parts) > 2:
		parts = parts[2:]
	}
	res := strings.Join(parts, "/")
	if group != "" {
		res += "." + group
	}
	return res
}

// isList says whether a GET path names a collection: /api/v1/pods, /api/v1/namespaces/x/pods
// (not /api/v1/namespaces/x, which is one namespace).
func isList(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if parts[0] == "apis" && len(parts) > 1 {
		parts = parts[1:] // the group
	}
	if len(parts) < 3 {
		return false // discovery: /api, /apis/group/version
	}
	rest := parts[2:] // past api|group and version
	if len(rest) >= 2 && rest[0] == "namespaces" {
		rest = rest[2:]
		if len(rest) == 0 {
			return false // one namespace
		}
	}
	return len(rest)%2 == 1
}

// kindOf is the resource a request path names, without namespace or name: /api/v1/namespaces/x
// and /api/v1/namespaces are "namespaces", .../namespaces/x/configmaps/y is "configmaps".
func kindOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	start := 2
	if parts[0] == "apis" {
		start = 3
	}
	if len(parts) <= start {
		return path
	}
	rest := parts[start:]
	if len(rest) > 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	return rest[0]
}

func (c *counter) snapshot() (counts, writes map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts), maps.Clone(c.writes)
}

func (c *counter) watched() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]string(nil), c.watches...)
	sort.Strings(out)
	return out
}
