package runner

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// afterWrite decides, from the write's outcome and what the object held before it, whether the
// object protects after the object phase; each case names the one fact that decides.
func TestAfterWrite(t *testing.T) {
	t.Parallel()
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Labels: map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: "p"}}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}
	foreign := map[string][]string{"gitops": {"data.x"}}
	failed := errors.New("refused")
	for _, c := range []struct {
		name          string
		cur           client.Object
		foreign       map[string][]string
		restoreFailed bool
		restored      bool
		err           error
		want          string
	}{
		{name: "restoring another writer's change failed", cur: own, foreign: foreign, restoreFailed: true, err: failed,
			want: "was changed by another writer (gitops set data.x) and restoring it failed"},
		{name: "written", cur: own, want: ""},
		{name: "created", cur: nil, want: ""},
		{name: "creating failed", cur: nil, err: failed, want: "does not exist and creating it failed"},
		{name: "restored spec, ownership not taken back", cur: own, foreign: foreign, err: failed, want: ""},
		{name: "one foreign field is enough", cur: other, foreign: map[string][]string{"gitops": nil}, err: failed, want: ""},
		{name: "changed under the plugin's own manager", cur: own, restored: true, err: failed,
			want: "was changed by a writer using the plugin's own field manager and restoring it failed"},
		{name: "the plugin's earlier version stands", cur: own, err: failed, want: ""},
		{name: "another writer's object", cur: other, err: failed, want: "could not be taken over"},
	} {
		assert.Equal(t, c.want, afterWrite(c.cur, "p", c.foreign, c.restoreFailed, c.restored, c.err), c.name)
	}
}

// A wait must come back: a zero default requeue would read as done.
func TestDefaultWaitRequeueIsAPositiveDelay(t *testing.T) {
	t.Parallel()
	assert.Positive(t, DefaultWaitRequeue)
	assert.Equal(t, DefaultWaitRequeue, (&Runner{}).newResult().WaitRequeue, "a Runner without WaitRequeue waits DefaultWaitRequeue")
}
