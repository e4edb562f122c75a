package runner

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// WarningHandler passes API server warnings (such as PodSecurity's "existing pods in namespace ...
// violate the new PodSecurity enforce level") to the Result of the runner call that caused them,
// and on to Next. [WithWarnings] installs it on a rest.Config in front of the handler the config
// already has; without it, warnings only reach the log and the Result has none.
type WarningHandler struct {
	// Next also receives every warning; nil drops them after collection.
	Next rest.WarningHandlerWithContext
}

// WithWarnings returns a copy of cfg whose warnings also reach the Result of the runner call
// that caused them. Whatever handled them before still does: the config's own handler, or, when
// it has none, the logger controller-runtime's client would have installed
// (log.NewKubeAPIWarningLogger, which logs through the request's context logger; see
// controller-runtime pkg/client/client.go, newClient). Build the manager or client from the copy.
func WithWarnings(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	var next rest.WarningHandlerWithContext
	switch {
	case cfg.WarningHandlerWithContext != nil:
		next = cfg.WarningHandlerWithContext
	case cfg.WarningHandler != nil:
		next = legacyHandler{cfg.WarningHandler}
	default:
		// The same options controller-runtime uses for its default.
		next = log.NewKubeAPIWarningLogger(log.KubeAPIWarningLoggerOptions{})
	}
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = WarningHandler{Next: next}
	return cfg
}

// legacyHandler adapts a handler without context.
type legacyHandler struct{ h rest.WarningHandler }

func (l legacyHandler) HandleWarningHeaderWithContext(_ context.Context, code int, agent, message string) {
	l.h.HandleWarningHeader(code, agent, message)
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
