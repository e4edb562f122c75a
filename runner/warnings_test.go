package runner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

type recordingHandler struct{ got *[]string }

func (r recordingHandler) HandleWarningHeaderWithContext(_ context.Context, _ int, _, message string) {
	*r.got = append(*r.got, message)
}

func (r recordingHandler) HandleWarningHeader(_ int, _, message string) {
	*r.got = append(*r.got, message)
}

func TestWithWarningsComposesWithTheConfigsHandler(t *testing.T) {
	t.Parallel()
	var got []string
	for name, cfg := range map[string]*rest.Config{
		"with context": {WarningHandlerWithContext: recordingHandler{&got}},
		"legacy":       {WarningHandler: recordingHandler{&got}},
	} {
		t.Run(name, func(t *testing.T) {
			got = nil
			wrapped := WithWarnings(cfg)
			assert.Nil(t, wrapped.WarningHandler, "one handler, so client-go does not pick the other")
			ctx, collected := collectWarnings(context.Background())
			wrapped.WarningHandlerWithContext.HandleWarningHeaderWithContext(ctx, 299, "", "w1")
			assert.Equal(t, []string{"w1"}, collected(), "the Result gets it")
			assert.Equal(t, []string{"w1"}, got, "the handler the config had still gets it")
			assert.NotEqual(t, cfg.WarningHandlerWithContext, wrapped.WarningHandlerWithContext, "the caller's config is not changed")
		})
	}
}

func TestWithWarningsKeepsControllerRuntimesDefault(t *testing.T) {
	t.Parallel()
	wrapped := WithWarnings(&rest.Config{})
	h, ok := wrapped.WarningHandlerWithContext.(WarningHandler)
	require.True(t, ok)
	assert.IsType(t, &log.KubeAPIWarningLogger{}, h.Next, "the logger controller-runtime's client installs when the config has none")
}
