package platform

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// This file checks that what every user namespace trusts is not a user's: the namespaces of the
// platform callers, the ingress gateway and the L4 exceptions, and the address ranges of the
// ipBlocks exceptions.

// exceptionNamespace is a namespace an L4 exception trusts, with the first field that names it.
type exceptionNamespace struct {
	path      string
	namespace string
	ns        *corev1.Namespace // nil when it does not exist
}

// exceptionNamespaces lists the namespaces the L4 exceptions name (by namespace, principal or
// service account), each once, in the order of the configuration.
func exceptionNamespaces(exceptions []config.L4Exception) []exceptionNamespace {
	var out []exceptionNamespace
	seen := map[string]bool{}
	add := func(path, namespace string) {
		if namespace != "" && !seen[namespace] {
			seen[namespace] = true
			out = append(out, exceptionNamespace{path: path, namespace: namespace})
		}
	}
	for i, e := range exceptions {
		base := fmt.Sprintf("authorization.l4Exceptions[%d]", i)
		for j, n := range e.Namespaces {
			add(fmt.Sprintf("%s.namespaces[%d]", base, j), n)
		}
		for j, p := range e.Principals {
			if _, n, _, err := config.ParsePrincipal(p); err == nil {
				add(fmt.Sprintf("%s.principals[%d]", base, j), n)
			}
		}
		for j, sa := range e.ServiceAccounts {
			n, _, _ := strings.Cut(sa, "/")
			add(fmt.Sprintf("%s.serviceAccounts[%d]", base, j), n)
		}
	}
	return out
}

// readExceptionNamespaces reads the Namespace of every namespace the L4 exceptions name.
func readExceptionNamespaces(ctx context.Context, r client.Reader, exceptions []config.L4Exception) ([]exceptionNamespace, error) {
	out := exceptionNamespaces(exceptions)
	for i := range out {
		ns := &corev1.Namespace{}
		err := r.Get(ctx, client.ObjectKey{Name: out[i].namespace}, ns)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("L4 exception (%s): reading Namespace %s: %w", out[i].path, out[i].namespace, err)
		default:
			out[i].ns = ns
		}
	}
	return out, nil
}

// userControlled reports every trusted namespace that is a user's.
func userControlled(rule ownership.Policy, trusted []trustedPrincipal, exceptions []exceptionNamespace) []Finding {
	var out []Finding
	for _, t := range trusted {
		why, ok := usersNamespace(rule, t.ns)
		if !ok {
			continue
		}
		admits := "which every user namespace admits without the user-id header"
		if t.forwardsForUsers() {
			admits = "which every user namespace admits with whatever user-id header it sends, so those pods act as any user"
		}
		out = append(out, Finding{
			Kind: FindingTrustedNamespaceUserControlled, What: t.what(), Namespace: t.namespace, Principal: t.principal,
			Problem: fmt.Sprintf("namespace %s is a user's (%s): the runner refuses its Profile, since the namespace is reserved, "+
				"but whoever owns it can run pods as ServiceAccount %s, %s", t.namespace, why, t.sa, admits),
			Fix: fmt.Sprintf("run %s in a namespace only admins control and set %s to its principal, or take namespace %s back from its user (%s)",
				t.what(), t.path, t.namespace, takeBack),
		})
	}
	for _, e := range exceptions {
		why, ok := usersNamespace(rule, e.ns)
		if !ok {
			continue
		}
		out = append(out, Finding{
			Kind: FindingTrustedNamespaceUserControlled, What: WhatL4Exception, Namespace: e.namespace,
			Problem: fmt.Sprintf("namespace %s, named by %s, is a user's (%s): the runner refuses its Profile, since the namespace is reserved, "+
				"but whoever owns it can run pods there that the ztunnel policy of every user namespace admits straight to the pods, past the waypoint",
				e.namespace, e.path, why),
			Fix: fmt.Sprintf("name a namespace only admins control in %s, or take namespace %s back from its user (%s)", e.path, e.namespace, takeBack),
		})
	}
	return out
}

const takeBack = "delete its Profile, or remove the Profile's owner reference, the owner annotation and the plugins' labels"

// usersNamespace says why ns is a user's, if it is: some Profile could have it under the
// runner's own rule ([ownership.Policy.Claimable]), or the plugins have marked its labels.
func usersNamespace(rule ownership.Policy, ns *corev1.Namespace) (string, bool) {
	if ns == nil {
		return "", false
	}
	if why, ok := rule.Claimable(ns); ok {
		return why, true
	}
	if _, ok := ns.Annotations[plugin.LabelOwnersAnnotation]; ok {
		return fmt.Sprintf("the plugins have labelled it: it has the annotation %s", plugin.LabelOwnersAnnotation), true
	}
	for _, m := range ns.ManagedFields {
		if m.Manager == plugin.LabelFieldManager || strings.HasPrefix(m.Manager, plugin.FieldManagerPrefix) {
			return fmt.Sprintf("the plugins have labelled it: field manager %s", m.Manager), true
		}
	}
	return "", false
}

// ipBlocksCoveringForwarders reports every ipBlocks entry that holds a pod IP of the ingress
// gateway or of an onBehalfOfUser caller. Both are admitted only with the user-id header, which
// only the waypoint checks; the ztunnel policy admits an ipBlocks source straight to the pods, so
// whoever can make such a forwarder send to a pod address would reach every user's pods.
// Validation cannot know pod addresses; this reads them.
func ipBlocksCoveringForwarders(exceptions []config.L4Exception, trusted []trustedPrincipal) []Finding {
	var out []Finding
	for i, e := range exceptions {
		for j, b := range e.IPBlocks {
			prefix, err := config.ParseIPBlock(b)
			if err != nil {
				continue // validation refuses it
			}
			path := fmt.Sprintf("authorization.l4Exceptions[%d].ipBlocks[%d]", i, j)
			for _, t := range trusted {
				if !t.forwardsForUsers() {
					continue
				}
				if hits := podsIn(prefix.Masked(), t.pods); len(hits) > 0 {
					out = append(out, Finding{
						Kind: FindingIPBlockCoversForwarder, What: t.what(), Namespace: t.namespace, Principal: t.principal,
						Problem: fmt.Sprintf("%s %q holds the IP of %d of its %d pod(s), e.g. %s: the ztunnel policy of every user namespace admits them "+
							"straight to the pods, past the waypoint that checks the user-id header, and %s forwards requests for any user",
							path, b, len(hits), len(t.pods), hits[0], t.what()),
						Fix: fmt.Sprintf("narrow %s to the addresses of the client it is for, so that it holds no pod of %s "+
							"(a node's pod range holds every pod scheduled on that node)", path, t.what()),
					})
				}
			}
		}
	}
	return out
}

// podsIn names the pods ("name (ip)") that have an IP in prefix.
func podsIn(prefix netip.Prefix, pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, ip := range podIPs(&p) {
			if prefix.Contains(ip) {
				out = append(out, fmt.Sprintf("%s (%s)", p.Name, ip))
				break
			}
		}
	}
	return out
}

// podIPs are the pod's addresses: status.podIPs, or status.podIP alone.
func podIPs(p *corev1.Pod) []netip.Addr {
	raw := []string{p.Status.PodIP}
	if len(p.Status.PodIPs) > 0 {
		raw = raw[:0]
		for _, ip := range p.Status.PodIPs {
			raw = append(raw, ip.IP)
		}
	}
	var out []netip.Addr
	for _, s := range raw {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
