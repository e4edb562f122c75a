package platform

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// This file compares a pod with the template of the ReplicaSet that controls it. A controller
// reference is any pod writer's to set, so a pod passes as one of istiod's waypoint only if it
// runs what the template says: the same containers, init containers and volumes, field by field
// (name, image, command, args, env, envFrom, volumeMounts, securityContext, ports, probes...).
// The API server defaults both alike (a ReplicaSet's template gets a pod spec's defaults); what
// only the pod gets, at its admission, is left out of the comparison:
//
//   - the ServiceAccount admission plugin's volume kube-api-access-<suffix> and its mounts, which
//     hold a token of the pod's own ServiceAccount, the one the template names;
//   - resources and resizePolicy: a pod's defaults copy limits into missing requests, a
//     LimitRange sets them and an in-place resize changes them; none changes what runs, or as whom.

// admittedTokenPrefix names the volume the ServiceAccount admission plugin adds
// (plugin/pkg/admission/serviceaccount, ServiceAccountVolumeName).
const admittedTokenPrefix = "kube-api-access-"

// admittedTokenPath is where the plugin mounts it, in every container.
const admittedTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// templateDiff names what of the pod's spec differs from its template's, or "".
func templateDiff(pod, template corev1.PodSpec) string {
	token := admittedTokenVolume(pod.Volumes, template.Volumes)
	diffs := containersDiff("container", pod.Containers, template.Containers, token)
	diffs = append(diffs, containersDiff("init container", pod.InitContainers, template.InitContainers, token)...)
	if len(pod.EphemeralContainers) > 0 {
		diffs = append(diffs, "ephemeral containers")
	}
	volumes := slices.DeleteFunc(slices.Clone(pod.Volumes), func(v corev1.Volume) bool { return v.Name == token })
	if !equality.Semantic.DeepEqual(volumes, template.Volumes) {
		diffs = append(diffs, "volumes")
	}
	return strings.Join(diffs, ", ")
}

// admittedTokenVolume is the name of the volume the ServiceAccount admission plugin added to the
// pod, or "": one named like it, that the template lacks, projecting what the plugin projects and
// nothing else.
func admittedTokenVolume(pod, template []corev1.Volume) string {
	for _, v := range pod {
		if strings.HasPrefix(v.Name, admittedTokenPrefix) && v.Projected != nil && len(v.Projected.Sources) > 0 &&
			!slices.ContainsFunc(template, func(t corev1.Volume) bool { return t.Name == v.Name }) &&
			!slices.ContainsFunc(v.Projected.Sources, notAdmitted) {
			return v.Name
		}
	}
	return ""
}

// notAdmitted is whether a projection is not one the ServiceAccount admission plugin makes: a
// token of the pod's ServiceAccount for the API server, the cluster's CA bundle, the namespace.
func notAdmitted(s corev1.VolumeProjection) bool {
	switch {
	case s.ServiceAccountToken != nil:
		return s.ServiceAccountToken.Audience != ""
	case s.ConfigMap != nil:
		return s.ConfigMap.Name != "kube-root-ca.crt"
	case s.DownwardAPI != nil:
		return slices.ContainsFunc(s.DownwardAPI.Items, func(f corev1.DownwardAPIVolumeFile) bool {
			return f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.namespace"
		})
	}
	return true
}

// containersDiff names, by container, the fields in which the pod's containers of a kind differ
// from the template's, position by position as the ReplicaSet controller copies them.
func containersDiff(kind string, pod, template []corev1.Container, token string) []string {
	if len(pod) != len(template) {
		return []string{fmt.Sprintf("%d %ss where the template has %d", len(pod), kind, len(template))}
	}
	var out []string
	for i := range pod {
		for _, f := range fieldsDiff(asAdmitted(pod[i], token), asAdmitted(template[i], token)) {
			out = append(out, fmt.Sprintf("%s %s: %s", kind, template[i].Name, f))
		}
	}
	return out
}

// asAdmitted is c without what a pod's admission may change (see the top of the file).
func asAdmitted(c corev1.Container, token string) corev1.Container {
	c.Resources, c.ResizePolicy = corev1.ResourceRequirements{}, nil
	c.VolumeMounts = slices.DeleteFunc(slices.Clone(c.VolumeMounts), func(m corev1.VolumeMount) bool {
		// Compared with equality.Semantic, not ==: newer k8s.io/api versions give VolumeMount a
		// slice field, which makes the struct incomparable (make test-newest).
		return token != "" && equality.Semantic.DeepEqual(m, corev1.VolumeMount{Name: token, ReadOnly: true, MountPath: admittedTokenPath})
	})
	return c
}

// fieldsDiff names, by their JSON names, the fields in which the structs a and b, of one type,
// differ.
func fieldsDiff(a, b any) []string {
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range av.NumField() {
		if !equality.Semantic.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			name, _, _ := strings.Cut(av.Type().Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
	}
	return out
}
