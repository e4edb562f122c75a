package clutter

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// How many of each kind one namespace holds.
const (
	Pods         = 10
	ConfigMaps   = 10
	RoleBindings = 3
	Secrets      = 5
	// ServiceAccounts are the profiles controller's default-editor and default-viewer, which the
	// Pods run as and which the profiles controller caches.
	ServiceAccounts = 2
	// EndpointSlices are those of the notebooks' Services (every other Pod is a notebook's), as
	// the EndpointSlice controller writes them; a controller with waypoints provisioned onDemand
	// caches every EndpointSlice of the cluster. The Services themselves are left out: no
	// implementation reads them.
	EndpointSlices = Pods / 2
	// PerNamespace is the number of objects Objects returns.
	PerNamespace = Pods + ConfigMaps + RoleBindings + Secrets + ServiceAccounts + EndpointSlices
)

// Objects returns the foreign objects of namespace ns whose Profile owner is owner, in the order
// they can be created (ServiceAccounts, ConfigMaps and Secrets before the Pods that use them).
func Objects(ns, owner string) []client.Object {
	var out []client.Object
	for _, sa := range []string{"default-editor", "default-viewer"} {
		out = append(out, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}})
	}
	for i := range ConfigMaps {
		out = append(out, configMap(ns, i))
	}
	for i := range Secrets {
		out = append(out, secret(ns, i))
	}
	for _, rb := range roleBindings(ns, owner) {
		out = append(out, rb)
	}
	for i := range Pods {
		if i%2 == 0 {
			out = append(out, notebookPod(ns, i))
		} else {
			out = append(out, pipelinePod(ns, i))
		}
	}
	for i := 0; i < Pods; i += 2 {
		out = append(out, notebookEndpointSlice(ns, i))
	}
	return out
}

// configMap holds about 3 KB, like a pipeline's or a notebook's configuration.
func configMap(ns string, i int) *corev1.ConfigMap {
	line := fmt.Sprintf("setting-%02d: value for %s, a line of configuration as a user's tooling writes it\n", i, ns)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-config-%d", i), Namespace: ns,
			Labels: map[string]string{"app": "workbench", "component": fmt.Sprintf("c%d", i)}},
		Data: map[string]string{
			"config.yaml":   strings.Repeat(line, 12),
			"settings.json": `{"theme":"light","autosave":true,"kernels":["python3","r"],"limits":{"cpu":"2","memory":"4Gi"}}`,
			"notes.txt":     strings.Repeat("notes of the team working in this namespace. ", 24),
		},
	}
}

// secret is about 1 KB: credentials a pipeline or a notebook mounts.
func secret(ns string, i int) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("credentials-%d", i), Namespace: ns},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"accesskey": []byte(strings.Repeat("A", 20)),
			"secretkey": []byte(strings.Repeat("s", 40)),
			"token":     []byte(strings.Repeat("t0k3n", 160)),
		},
	}
}

// roleBindings are the three bindings kfam and the profiles controller make in a namespace with two
// contributors: the owner's namespaceAdmin, and one edit and one view contributor, named and
// annotated as kfam does (kubeflow/dashboard components/access-management/kfam/bindings.go).
func roleBindings(ns, owner string) []*rbacv1.RoleBinding {
	rb := func(name, user, role, clusterRole string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Annotations: map[string]string{authz.UserAnnotation: user, authz.RoleAnnotation: role}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
	}
	editor, viewer := "editor-"+owner, "viewer-"+owner
	return []*rbacv1.RoleBinding{
		rb("namespaceAdmin", owner, "admin", "kubeflow-admin"),
		rb(authz.ContributorPolicyName(editor, authz.RoleEdit), editor, authz.RoleEdit, "kubeflow-edit"),
		rb(authz.ContributorPolicyName(viewer, authz.RoleView), viewer, authz.RoleView, "kubeflow-view"),
	}
}

// notebookPod is a Jupyter notebook server's pod as the notebook controller's StatefulSet makes it.
func notebookPod(ns string, i int) *corev1.Pod {
	name := fmt.Sprintf("notebook-%d", i)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-0", Namespace: ns,
			Labels: map[string]string{"app": name, "notebook-name": name, "statefulset": name,
				"statefulset.kubernetes.io/pod-name": name + "-0"},
			Annotations: map[string]string{"notebooks.kubeflow.org/server-type": "jupyter",
				"notebooks.kubeflow.org/last-activity": "2026-11-30T10:00:00Z"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "default-editor",
			SecurityContext:    &corev1.PodSecurityContext{FSGroup: ptr.To[int64](100)},
			Containers: []corev1.Container{{
				Name:       name,
				Image:      "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:v1.10.0",
				WorkingDir: "/home/jovyan",
				Ports:      []corev1.ContainerPort{{Name: "notebook-port", ContainerPort: 8888, Protocol: corev1.ProtocolTCP}},
				Env: append(commonEnv(ns, i),
					corev1.EnvVar{Name: "NB_PREFIX", Value: "/notebook/" + ns + "/" + name}),
				Resources: resources("500m", "1Gi", "2", "4Gi"),
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: "/home/jovyan"},
					{Name: "dshm", MountPath: "/dev/shm"},
					{Name: "config", MountPath: "/etc/workbench", ReadOnly: true},
					{Name: "credentials", MountPath: "/var/run/credentials", ReadOnly: true},
				},
				LivenessProbe:  httpProbe("/notebook/"+ns+"/"+name+"/api", 8888),
				ReadinessProbe: httpProbe("/notebook/"+ns+"/"+name+"/api", 8888),
			}},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-workspace"}}},
				{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("app-config-%d", i)}}}},
				{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: fmt.Sprintf("credentials-%d", i%Secrets)}}},
			},
		},
	}
}

// notebookEndpointSlice is the EndpointSlice of the Service in front of notebookPod(ns, i), as
// kube-controller-manager's EndpointSlice controller writes it: the Service's labels copied, its
// name and the controller's in the well-known labels, and one ready endpoint whose targetRef names
// the pod (k8s.io/endpointslice reconciler_helpers.go newEndpointSlice, utils.go podToEndpoint).
func notebookEndpointSlice(ns string, i int) *discoveryv1.EndpointSlice {
	name := fmt.Sprintf("notebook-%d", i)
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-x7k2p", Namespace: ns,
			Labels: map[string]string{"app": name, "notebook-name": name,
				discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: plugin.EndpointSliceController},
			Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-11-30T10:00:00Z"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{fmt.Sprintf("10.244.%d.%d", i, 10+i)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To("worker-1"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name + "-0"},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http-" + name), Port: ptr.To[int32](8888), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

// pipelinePod is an Argo Workflows step of a Kubeflow pipeline run: an init container, the main
// step and Argo's wait sidecar.
func pipelinePod(ns string, i int) *corev1.Pod {
	name := fmt.Sprintf("pipeline-run-%d-system-container-impl-%d", i, 1000+i)
	argo := func(cname string, args ...string) corev1.Container {
		return corev1.Container{
			Name: cname, Image: "quay.io/argoproj/argoexec:v3.5.14",
			Command: []string{"argoexec"}, Args: args,
			Env: []corev1.EnvVar{
				{Name: "ARGO_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "ARGO_CONTAINER_RUNTIME_EXECUTOR", Value: "emissary"},
				{Name: "GODEBUG", Value: "x509ignoreCN=0"},
			},
			Resources:    resources("10m", "64Mi", "500m", "256Mi"),
			VolumeMounts: []corev1.VolumeMount{{Name: "var-run-argo", MountPath: "/var/run/argo"}},
		}
	}
	main := corev1.Container{
		Name: "main", Image: "python:3.11",
		Command: []string{"/var/run/argo/argoexec", "emissary", "--", "sh", "-c"},
		Args:    []string{"python3 -m kfp.dsl.executor_main --component_module_path /tmp/component.py --executor_input '{}' --function_to_execute train"},
		Env: append(commonEnv(ns, i),
			corev1.EnvVar{Name: "KFP_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			corev1.EnvVar{Name: "KFP_POD_UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}),
		Resources: resources("1", "2Gi", "4", "8Gi"),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "var-run-argo", MountPath: "/var/run/argo"},
			{Name: "kfp-launcher", MountPath: "/kfp-launcher"},
			{Name: "config", MountPath: "/etc/workbench", ReadOnly: true},
		},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{"workflows.argoproj.io/workflow": fmt.Sprintf("pipeline-run-%d", i),
				"pipelines.kubeflow.org/v2_component": "true", "workflows.argoproj.io/completed": "false"},
			Annotations: map[string]string{"workflows.argoproj.io/node-name": fmt.Sprintf("pipeline-run-%d.system-container-impl", i),
				"pipelines.kubeflow.org/v2_pipeline": "true"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "default-editor",
			RestartPolicy:      corev1.RestartPolicyNever,
			InitContainers:     []corev1.Container{argo("init", "init", "--loglevel", "info")},
			Containers:         []corev1.Container{argo("wait", "wait", "--loglevel", "info"), main},
			Volumes: []corev1.Volume{
				{Name: "var-run-argo", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "kfp-launcher", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("app-config-%d", i)}}}},
			},
		},
	}
}

func commonEnv(ns string, i int) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "JUPYTER_ENABLE_LAB", Value: "true"},
		{Name: "PIP_INDEX_URL", Value: "https://pypi.org/simple"},
		{Name: "MLFLOW_TRACKING_URI", Value: "http://mlflow.kubeflow.svc.cluster.local:5000"},
		{Name: "AWS_ACCESS_KEY_ID", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("credentials-%d", i%Secrets)}, Key: "accesskey"}}},
		{Name: "AWS_SECRET_ACCESS_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: fmt.Sprintf("credentials-%d", i%Secrets)}, Key: "secretkey"}}},
		{Name: "S3_ENDPOINT", Value: "minio-service.kubeflow:9000"},
		{Name: "TEAM", Value: ns},
	}
}

func resources(cpuReq, memReq, cpuLim, memLim string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq), corev1.ResourceMemory: resource.MustParse(memReq)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim), corev1.ResourceMemory: resource.MustParse(memLim)},
	}
}

func httpProbe(path string, port int) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt(port)}},
		InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 3, FailureThreshold: 6,
	}
}
