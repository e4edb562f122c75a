package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// IstiodNamespace is where istiod runs (its POD_NAMESPACE) and reads its ConfigMaps and the
// waypoint class defaults.
const IstiodNamespace = "istio-system"

// Istiod is a pilot-discovery process serving the test API server.
type Istiod struct {
	// XDS is the plaintext xDS address (15010 in a pod); HTTP serves /ready and /debug (8080).
	XDS, HTTP string
	// Log is istiod's log file.
	Log string

	t         testing.TB
	bin, kube string
	dir       string
	cmd       *exec.Cmd
	exited    chan struct{}
	ports     [5]string
	restarts  int
}

// StartIstiod renders istiod's ConfigMaps from the chart into its namespace, starts pilot-discovery
// against kubeconfig and waits until it reports ready. It stops when the test ends.
func StartIstiod(t testing.TB, c client.Client, kubeconfig string) *Istiod {
	t.Helper()
	bin, chart := mustEnv(t, "ISTIOD_BIN"), mustEnv(t, "ISTIO_CHART")
	if err := applyIstiodConfig(t.Context(), c, Chart{Dir: chart, Namespace: IstiodNamespace, Hub: "docker.io/istio", Tag: "1.30.3"}); err != nil {
		t.Fatalf("istiod's ConfigMaps: %v", err)
	}
	i := &Istiod{t: t, bin: bin, kube: kubeconfig, dir: t.TempDir()}
	for n := range i.ports {
		i.ports[n] = freeAddr(t)
	}
	i.HTTP, i.XDS = i.ports[0], i.ports[1]
	t.Cleanup(i.Stop)
	i.Start()
	return i
}

// Start starts pilot-discovery and waits for /ready; a stopped istiod starts again on the same
// ports, as a restarted pod would on its own.
func (i *Istiod) Start() {
	i.t.Helper()
	i.Log = filepath.Join(i.dir, fmt.Sprintf("istiod-%d.log", i.restarts))
	i.restarts++
	log, err := os.Create(i.Log)
	if err != nil {
		i.t.Fatalf("creating istiod's log: %v", err)
	}
	i.cmd = exec.Command(i.bin, i.args()...)
	i.cmd.Dir, i.cmd.Stdout, i.cmd.Stderr = i.dir, log, log
	i.cmd.Env = append(os.Environ(), istiodEnv()...)
	if err := i.cmd.Start(); err != nil {
		i.t.Fatalf("starting pilot-discovery: %v", err)
	}
	i.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); log.Close(); close(done) }(i.cmd, i.exited)
	if err := i.waitReady(2 * time.Minute); err != nil {
		i.Stop()
		i.t.Fatalf("istiod: %v; last lines of %s:\n%s", err, i.Log, tail(i.Log, 30))
	}
	i.t.Logf("istiod (pilot-discovery pid %d) ready: xDS %s, log %s", i.cmd.Process.Pid, i.XDS, i.Log)
}

// Stop ends istiod (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (i *Istiod) Stop() {
	if i.cmd == nil || i.cmd.Process == nil {
		return
	}
	select {
	case <-i.exited:
		return
	default:
	}
	_ = i.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-i.exited:
	case <-time.After(10 * time.Second):
		_ = i.cmd.Process.Kill()
		<-i.exited
	}
}

// Restart stops istiod and starts it again.
func (i *Istiod) Restart() {
	i.t.Helper()
	i.Stop()
	i.Start()
}

// args are pilot-discovery's flags: every port on 127.0.0.1, the cluster's domain, a short
// shutdown.
func (i *Istiod) args() []string {
	return []string{"discovery", "--kubeconfig", i.kube, "--domain", "cluster.local",
		"--httpAddr", i.ports[0], "--grpcAddr", i.ports[1], "--secureGRPCAddr", i.ports[2],
		"--httpsAddr", i.ports[3], "--monitoringAddr", i.ports[4],
		"--ctrlz_address", "127.0.0.1", "--ctrlz_port", "0", "--shutdownDuration", "1s",
		"--keepaliveMaxServerConnectionAge", "30m", "--log_output_level", "default:info"}
}

// istiodEnv is what the chart's Deployment sets (templates/deployment.yaml) with the ambient
// profile, and one istiod without leader election, so its controllers start at once.
func istiodEnv() []string {
	return []string{"POD_NAMESPACE=" + IstiodNamespace, "POD_NAME=istiod-test", "SERVICE_ACCOUNT=istiod",
		"REVISION=default", "CLUSTER_ID=Kubernetes", "PILOT_CERT_PROVIDER=istiod",
		"CA_TRUSTED_NODE_ACCOUNTS=" + IstiodNamespace + "/ztunnel", "PILOT_ENABLE_AMBIENT=true",
		"PILOT_ENABLE_ANALYSIS=false", "ENABLE_LEADER_ELECTION=false", "PLATFORM=", "GOMAXPROCS=2"}
}

func (i *Istiod) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-i.exited:
			return errors.New("pilot-discovery exited before it was ready")
		default:
		}
		resp, err := http.Get("http://" + i.HTTP + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %s", limit)
}

// applyIstiodConfig creates istiod's namespace and server-side applies its two ConfigMaps: the
// injector one must exist before istiod starts, or it runs without the waypoint template.
func applyIstiodConfig(ctx context.Context, c client.Client, chart Chart) error {
	if err := ensureNamespace(ctx, c, chart.Namespace); err != nil {
		return err
	}
	cms, err := chart.ConfigMaps()
	if err != nil {
		return err
	}
	for _, cm := range cms {
		if err := applyObject(ctx, c, cm, "istiod-harness"); err != nil {
			return fmt.Errorf("applying ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return nil
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

func mustEnv(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run these tests with `make test-istiod ISTIO=<istio/istio checkout or git dir holding tag 1.30.3> AGW=<agentgateway checkout>`", name)
	}
	return v
}

// tail is the last n lines of a file, for a failure message.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
