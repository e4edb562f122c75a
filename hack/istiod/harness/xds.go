package harness

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"istio.io/istio/pkg/workloadapi"
	"istio.io/istio/pkg/workloadapi/security"
)

// The resource types istiod serves ztunnel (pilot/pkg/xds/v3/model.go: WorkloadType,
// WorkloadAuthorizationType), each subscribed to by wildcard over delta ADS.
const (
	AddressType       = "type.googleapis.com/istio.workload.Address"
	AuthorizationType = "type.googleapis.com/istio.security.Authorization"
)

// Ztunnel is an xDS client that subscribes to istiod as a ztunnel does: delta ADS, a node ID
// "ztunnel~<ip>~<pod>.<ns>~<ns>.svc.cluster.local" with the metadata ztunnel sends, wildcard
// subscriptions of both its types, every response ACKed. It keeps the Authorization resources it
// holds and reconnects (starting over, as a ztunnel does) when the stream breaks, such as when
// istiod restarts.
type Ztunnel struct {
	mu        sync.Mutex
	policies  map[string]*security.Authorization
	addresses int
	streams   int
}

// ConnectZtunnel subscribes to istiod at addr until the test ends.
func ConnectZtunnel(t testing.TB, addr string) *Ztunnel {
	z := &Ztunnel{policies: map[string]*security.Authorization{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := z.stream(ctx, addr); err != nil && ctx.Err() == nil {
				t.Logf("ztunnel xDS stream to %s: %v; reconnecting", addr, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return z
}

// Policy is the Authorization named "<namespace>/<name>" the client holds, or nil.
func (z *Ztunnel) Policy(key string) *security.Authorization {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.policies[key]
}

// Policies are every Authorization the client holds, by name.
func (z *Ztunnel) Policies() map[string]*security.Authorization {
	z.mu.Lock()
	defer z.mu.Unlock()
	return maps.Clone(z.policies)
}

// Streams counts the streams opened so far (more than one after a reconnect).
func (z *Ztunnel) Streams() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.streams
}

func (z *Ztunnel) stream(ctx context.Context, addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dialling: %w", err)
	}
	defer conn.Close()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return fmt.Errorf("opening the delta ADS stream: %w", err)
	}
	if err := subscribe(stream); err != nil {
		return err
	}
	z.mu.Lock()
	z.policies, z.addresses = map[string]*security.Authorization{}, 0
	z.streams++
	z.mu.Unlock()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("receiving: %w", err)
		}
		if err := z.hold(resp); err != nil {
			return err
		}
		if err := stream.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce}); err != nil {
			return fmt.Errorf("acknowledging: %w", err)
		}
	}
}

func subscribe(stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) error {
	meta, err := structpb.NewStruct(map[string]any{"CLUSTER_ID": "Kubernetes", "NAMESPACE": IstiodNamespace,
		"SERVICE_ACCOUNT": "ztunnel", "NODE_NAME": "node-1", "ISTIO_VERSION": "1.30.3"})
	if err != nil {
		return fmt.Errorf("node metadata: %w", err)
	}
	node := &core.Node{Id: "ztunnel~10.244.250.2~ztunnel-test." + IstiodNamespace + "~" + IstiodNamespace + ".svc.cluster.local", Metadata: meta}
	for i, typ := range []string{AddressType, AuthorizationType} {
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: typ}
		if i == 0 {
			req.Node = node
		}
		if err := stream.Send(req); err != nil {
			return fmt.Errorf("subscribing to %s: %w", typ, err)
		}
	}
	return nil
}

func (z *Ztunnel) hold(resp *discovery.DeltaDiscoveryResponse) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	switch resp.TypeUrl {
	case AuthorizationType:
		for _, name := range resp.RemovedResources {
			delete(z.policies, name)
		}
		for _, r := range resp.Resources {
			a := &security.Authorization{}
			if err := r.Resource.UnmarshalTo(a); err != nil {
				return fmt.Errorf("decoding Authorization %s: %w", r.Name, err)
			}
			z.policies[r.Name] = a
		}
	case AddressType:
		for _, r := range resp.Resources {
			if err := r.Resource.UnmarshalTo(&workloadapi.Address{}); err != nil {
				return fmt.Errorf("decoding Address %s: %w", r.Name, err)
			}
		}
		z.addresses += len(resp.Resources) - len(resp.RemovedResources)
	}
	return nil
}
