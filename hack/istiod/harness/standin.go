package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// standInManager is the field manager of everything the stand-in writes.
const standInManager = "istiod-harness-standin"

// StandIn plays, in the namespaces it watches, the parts of a cluster a bare API server lacks and
// nothing else: the ReplicaSet controller, scheduler and kubelet (Pods from each Deployment's
// template, then Running and Ready with an IP), the EndpointSlice controller (one slice per
// Service with a selector) and the garbage collector (objects whose owner is gone; terminating
// Pods). It never writes a Gateway, its status, or anything istiod or the controller writes.
type StandIn struct {
	c    client.Client
	mu   sync.Mutex
	nss  map[string]bool
	errs map[string]string
	ip   int
}

// StartStandIn runs the stand-in every 200 ms until the test ends.
func StartStandIn(t testing.TB, c client.Client) *StandIn {
	s := &StandIn{c: c, nss: map[string]bool{}, errs: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s.pass(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// Watch adds namespaces the stand-in acts in.
func (s *StandIn) Watch(namespaces ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range namespaces {
		s.nss[ns] = true
	}
}

// Refused is what the API server refused of the stand-in's last try in namespace ns (a Pod that
// Pod Security admission rejected, say), or "".
func (s *StandIn) Refused(ns string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs[ns]
}

func (s *StandIn) namespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for ns := range s.nss {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

func (s *StandIn) pass(ctx context.Context) {
	for _, ns := range s.namespaces() {
		err := s.namespace(ctx, ns)
		s.mu.Lock()
		if err != nil && ctx.Err() == nil {
			s.errs[ns] = err.Error()
		} else {
			delete(s.errs, ns)
		}
		s.mu.Unlock()
	}
}

func (s *StandIn) namespace(ctx context.Context, ns string) error {
	if err := s.collectGarbage(ctx, ns); err != nil {
		return err
	}
	if err := s.scaleDeployments(ctx, ns); err != nil {
		return err
	}
	if err := s.readyPods(ctx, ns); err != nil {
		return err
	}
	return s.sliceServices(ctx, ns)
}

// scaleDeployments keeps as many Pods of each Deployment as its replicas (1 when unset), made from
// its template, so the API server's admission (Pod Security among it) judges the template.
func (s *StandIn) scaleDeployments(ctx context.Context, ns string) error {
	var deps appsv1.DeploymentList
	if err := s.c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing Deployments in %s: %w", ns, err)
	}
	for i := range deps.Items {
		if err := s.scale(ctx, &deps.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *StandIn) scale(ctx context.Context, d *appsv1.Deployment) error {
	pods, err := s.ownedPods(ctx, d)
	if err != nil {
		return err
	}
	want := int(ptr.Deref(d.Spec.Replicas, 1))
	for n := 0; n < want; n++ {
		name := fmt.Sprintf("%s-standin-%d", d.Name, n)
		if slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == name }) {
			continue
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.Namespace, Labels: d.Spec.Template.Labels,
				Annotations:     d.Spec.Template.Annotations,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: *d.Spec.Template.Spec.DeepCopy(),
		}
		if err := s.c.Create(ctx, pod, client.FieldOwner(standInManager)); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating Pod %s/%s from Deployment %s's template: %w", d.Namespace, name, d.Name, err)
		}
	}
	for _, p := range pods {
		var n int
		if _, err := fmt.Sscanf(p.Name[len(d.Name):], "-standin-%d", &n); err == nil && n >= want {
			if err := s.c.Delete(ctx, &p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("scaling Deployment %s/%s down: %w", d.Namespace, d.Name, err)
			}
		}
	}
	return nil
}

func (s *StandIn) ownedPods(ctx context.Context, d *appsv1.Deployment) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := s.c.List(ctx, &pods, client.InNamespace(d.Namespace)); err != nil {
		return nil, fmt.Errorf("listing Pods in %s: %w", d.Namespace, err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == d.UID {
			out = append(out, p)
		}
	}
	return out, nil
}

// readyPods marks every Pod Running and Ready with an IP, as its kubelet would, and removes the
// terminating ones, as a kubelet does once their containers stopped.
func (s *StandIn) readyPods(ctx context.Context, ns string) error {
	var pods corev1.PodList
	if err := s.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing Pods in %s: %w", ns, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			if err := s.c.Delete(ctx, p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("removing terminating Pod %s/%s: %w", ns, p.Name, err)
			}
			continue
		}
		if podReady(p) {
			continue
		}
		if err := s.ready(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (s *StandIn) ready(ctx context.Context, p *corev1.Pod) error {
	s.mu.Lock()
	s.ip++
	ip := fmt.Sprintf("10.244.%d.%d", s.ip/250, s.ip%250+2)
	s.mu.Unlock()
	now := metav1.Now()
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		HostIP: "192.168.0.10", StartTime: &now, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}}
	if err := s.c.Status().Update(ctx, p); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("marking Pod %s/%s ready: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	return p.Status.PodIP != "" && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// sliceServices writes, for each Service with a selector, one EndpointSlice of the Pods it selects
// (ready or not, none terminating), labelled as the EndpointSlice controller labels its own.
func (s *StandIn) sliceServices(ctx context.Context, ns string) error {
	var svcs corev1.ServiceList
	if err := s.c.List(ctx, &svcs, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing Services in %s: %w", ns, err)
	}
	var pods corev1.PodList
	if err := s.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("listing Pods in %s: %w", ns, err)
	}
	for i := range svcs.Items {
		if len(svcs.Items[i].Spec.Selector) == 0 {
			continue
		}
		if err := s.slice(ctx, &svcs.Items[i], pods.Items); err != nil {
			return err
		}
	}
	return nil
}

func (s *StandIn) slice(ctx context.Context, svc *corev1.Service, pods []corev1.Pod) error {
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	es := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-standin", Namespace: svc.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for k, v := range svc.Labels {
		if _, set := es.Labels[k]; !set {
			es.Labels[k] = v
		}
	}
	for _, port := range svc.Spec.Ports {
		target := port.TargetPort.IntVal
		if target == 0 {
			target = port.Port
		}
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr.To(port.Name), Port: ptr.To(target),
			Protocol: ptr.To(port.Protocol), AppProtocol: port.AppProtocol})
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(podReady(&p)), Serving: ptr.To(podReady(&p)), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}})
	}
	slices.SortFunc(es.Endpoints, func(a, b discoveryv1.Endpoint) int { return compare(a.TargetRef.Name, b.TargetRef.Name) })
	if err := applyObject(ctx, s.c, es, standInManager); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing EndpointSlice %s/%s: %w", es.Namespace, es.Name, err)
	}
	return nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// collectGarbage deletes the objects of the kinds istiod and the stand-in make whose owner is gone
// (no object of the owner's kind with its UID in the namespace), as the garbage collector would.
func (s *StandIn) collectGarbage(ctx context.Context, ns string) error {
	owners, err := s.ownerUIDs(ctx, ns)
	if err != nil {
		return err
	}
	lists := []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ServiceAccountList{},
		&autoscalingv2.HorizontalPodAutoscalerList{}, &policyv1.PodDisruptionBudgetList{}, &corev1.PodList{},
		&discoveryv1.EndpointSliceList{}}
	for _, l := range lists {
		if err := s.c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("listing %T in %s: %w", l, ns, err)
		}
		if err := s.deleteOrphans(ctx, l, owners); err != nil {
			return err
		}
	}
	return nil
}

func (s *StandIn) deleteOrphans(ctx context.Context, l client.ObjectList, owners map[types.UID]bool) error {
	items, err := metaItems(l)
	if err != nil {
		return err
	}
	for _, o := range items {
		refs := o.GetOwnerReferences()
		if len(refs) == 0 || slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return owners[r.UID] }) {
			continue
		}
		if !slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return collectedOwnerKinds[r.Kind] }) {
			continue
		}
		if err := s.c.Delete(ctx, o, client.GracePeriodSeconds(0), client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("collecting %s/%s, whose owner is gone: %w", o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// collectedOwnerKinds are the owners whose dependents the stand-in collects: the waypoint Gateway
// (istiod's objects), the Deployment (the stand-in's Pods) and the Service (its slices).
var collectedOwnerKinds = map[string]bool{"Gateway": true, "Deployment": true, "Service": true}

func (s *StandIn) ownerUIDs(ctx context.Context, ns string) (map[types.UID]bool, error) {
	uids := map[types.UID]bool{}
	var gws gatewayv1.GatewayList
	var deps appsv1.DeploymentList
	var svcs corev1.ServiceList
	for _, l := range []client.ObjectList{&gws, &deps, &svcs} {
		if err := s.c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing owners in %s: %w", ns, err)
		}
		items, err := metaItems(l)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			uids[o.GetUID()] = true
		}
	}
	return uids, nil
}
