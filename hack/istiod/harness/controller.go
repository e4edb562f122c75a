package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Controller is the reference controller (cmd/profile-plugins-controller, built by `make
// test-istiod`) running as a process against the test API server; its setup lives in package
// main, so it runs as the binary an admin deploys.
type Controller struct {
	Log string

	t      testing.TB
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartController writes config (a PluginConfig YAML document) to a file and starts the controller
// with it against kubeconfig, waiting until its health endpoint answers. It stops when the test ends.
func StartController(t testing.TB, kubeconfig, config string) *Controller {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatalf("writing the controller's configuration: %v", err)
	}
	probe := freeAddr(t)
	c := &Controller{t: t, Log: filepath.Join(dir, "controller.log")}
	log, err := os.Create(c.Log)
	if err != nil {
		t.Fatalf("creating the controller's log: %v", err)
	}
	c.cmd = exec.Command(filepath.Join(mustEnv(t, "PP_BIN"), "profile-plugins-controller"), "-config", cfgPath,
		"-metrics-bind-address", "0", "-health-probe-bind-address", probe)
	c.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting profile-plugins-controller: %v", err)
	}
	c.exited = make(chan struct{})
	go func() { _ = c.cmd.Wait(); log.Close(); close(c.exited) }()
	t.Cleanup(c.Stop)
	if err := c.waitHealthy(probe, time.Minute); err != nil {
		c.Stop()
		t.Fatalf("profile-plugins-controller: %v; last lines of %s:\n%s", err, c.Log, tail(c.Log, 30))
	}
	return c
}

func (c *Controller) waitHealthy(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			return errors.New("exited before it was healthy")
		default:
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not healthy after %s", limit)
}

// Stop ends the controller (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (c *Controller) Stop() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// ApplyClusterObjects runs `profile-plugins render -cluster -config <config>` and server-side
// applies what it prints, as an admin does once: the waypoint class defaults, the waypoint
// default-deny and the guard. It returns the objects applied.
func ApplyClusterObjects(t testing.TB, c client.Client, config string) []*unstructured.Unstructured {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatalf("writing the configuration: %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(mustEnv(t, "PP_BIN"), "profile-plugins"), "render", "-cluster", "-config", cfgPath)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("profile-plugins render -cluster: %v\n%s", err, stderr.String())
	}
	objs, err := decodeYAMLStream(stdout.Bytes())
	if err != nil {
		t.Fatalf("reading what render -cluster printed: %v", err)
	}
	for _, o := range objs {
		if err := ensureNamespace(t.Context(), c, o.GetNamespace()); err != nil {
			t.Fatal(err)
		}
		if err := applyObject(t.Context(), c, o, "platform-admin"); err != nil {
			t.Fatalf("applying %s %s/%s from render -cluster: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return objs
}

// ensureNamespace creates namespace ns (istiod's, for the class defaults) unless it exists or is "".
func ensureNamespace(ctx context.Context, c client.Client, ns string) error {
	if ns == "" {
		return nil
	}
	obj := &corev1.Namespace{}
	obj.Name = ns
	if err := c.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}

func decodeYAMLStream(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// applyObject server-side applies obj as owner, taking over conflicting fields.
func applyObject(ctx context.Context, c client.Client, obj runtime.Object, owner string) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("converting %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	//nolint:staticcheck // client.Apply with an unstructured object: applyconfigurations of every kind would be needed otherwise.
	return c.Patch(ctx, u, client.Apply, client.FieldOwner(owner), client.ForceOwnership)
}
