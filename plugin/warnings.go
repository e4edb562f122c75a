package plugin

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"
)

// WarningHandler passes API server warnings (such as PodSecurity's "existing pods in namespace ...
// violate the new PodSecurity enforce level") to the Result of the runner call that caused them.
// Install it on the rest.Config the runner's client is built from:
//
//	cfg.WarningHandlerWithContext = plugin.WarningHandler{Next: rest.WarningLogger{}}
//
// Without it, warnings only reach client-go's default logger and the Result has none.
type WarningHandler struct {
	// Next also receives every warning; nil drops them after collection.
	Next rest.WarningHandlerWithContext
}

var _ rest.WarningHandlerWithContext = WarningHandler{}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (h WarningHandler) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, message string) {
	if c, ok := ctx.Value(warningsKey{}).(*warningCollector); ok {
		c.add(message)
	}
	if h.Next != nil {
		h.Next.HandleWarningHeaderWithContext(ctx, code, agent, message)
	}
}

type warningsKey struct{}

type warningCollector struct {
	mu       sync.Mutex
	messages []string
}

func (c *warningCollector) add(m string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.messages = append(c.messages, m)
}

// collectWarnings returns a context whose requests report warnings to the returned function.
func collectWarnings(ctx context.Context) (context.Context, func() []string) {
	c := &warningCollector{}
	return context.WithValue(ctx, warningsKey{}, c), func() []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		return append([]string(nil), c.messages...)
	}
}
