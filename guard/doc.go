// Package guard is the admission guard: ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1,
// served since Kubernetes 1.30, no webhook server to run) and their bindings that refuse, in the
// namespaces the plugins manage, what the runner could only repair after the fact, and what it
// cannot repair at all.
//
// What is refused, to everyone but the controller's ServiceAccount (guard.controllerServiceAccount),
// the break-glass group (guard.breakGlassGroup), system:masters (which no authorizer refuses
// anything, deleting the guard included) and Kubernetes' own controllers (kube-system's
// ServiceAccounts and system:kube-controller-manager, which delete a namespace's objects and
// instantiate the workloads checked here):
//
//   - [ManagedObjectsPolicy]: updates and deletes of the objects the plugins manage (the runner's
//     managed-by label), creation of objects with the plugins' labels, and creation under the names
//     only the plugins use: the ztunnel policy, the waypoint Gateway and its seccomp ConfigMap. The
//     owner policy's name is left to the profiles controller, which makes it in sidecar mode.
//   - [NamespaceLabelsPolicy]: any change of the enrolment, mesh and Pod Security labels of a
//     managed namespace, and of its owner annotation (which makes it managed), also through the
//     status and finalize subresources.
//   - [PodsPolicy], [WorkloadsPolicy], [CronJobsPolicy]: pods and pod templates that opt out of the
//     mesh (ambient: the label istio.io/dataplane-mode=none, the annotation
//     ambient.istio.io/bypass-inbound-capture, and sidecar.istio.io/status, which Istio's CNI agent
//     reads as a sidecar pod, on any template, any new pod, in any update that adds it, and
//     without an istio-proxy container; sidecar mode: sidecar.istio.io/inject other than "true" as
//     label or annotation, traffic.sidecar.istio.io/includeInboundPorts other than "*",
//     excludeInboundPorts beyond the status port, sidecar.istio.io/interceptionMode NONE, excluded
//     or rerouted interfaces, proxy.istio.io/config, inject.istio.io/templates other than
//     "sidecar", proxy.istio.io/overrides on a template, an istio-proxy container or init
//     container with DISABLE_ENVOY true, ISTIO_DUAL_STACK other than true or a proxy type other
//     than sidecar, a container named istio-init under istio-cni, a pod a user creates without
//     istio-proxy or without sidecar.istio.io/status, that is, one Istio did not inject, and an
//     update that removes that annotation), except the pods guard.optOutAllowed names and workloads guard.meshServiceAccounts (istiod) make; and pods or templates that point
//     istio.io/use-waypoint (or Istio 1.32's istio.io/use-waypoint-canary) anywhere but the
//     namespace's own waypoint or istio.io/use-waypoint-namespace (-canary-namespace) anywhere but
//     their own namespace.
//   - [ServicesPolicy]: the same labels on Services. Pods and Services are judged through
//     their status subresource too, which takes labels and annotations: a status write passes
//     when it leaves them as they were. Also Endpoints and EndpointSlices whose addresses name a
//     pod of another namespace that is not reserved (istiod would count that pod as a member of
//     this namespace's Service).
//   - [BindingsPolicy]: Bindings (pods/binding and the older bindings resource) that carry a label
//     or annotation of Istio's domain, which the API server would copy onto the pod.
//   - [KubeflowPolicy]: Kubeflow's PodDefaults with such labels or annotations, DISABLE_ENVOY,
//     ISTIO_DUAL_STACK or a container named istio-proxy, istio-init or istio-validation, which Kubeflow's webhook
//     copies onto pods, also those kube-controller-manager creates; PodDefaults whose selector
//     may match the waypoint's pods (the webhook would merge their env and volumes into the
//     waypoint's proxy); and Notebooks whose
//     notebooks.kubeflow.org/http-headers-request-set sets the user-id header, which the notebook
//     controller puts on the ingress route; and Katib's Experiments and Trials with a label of
//     Istio's domain or a custom metrics collector named istio-proxy, istio-init or
//     istio-validation, which Katib's pod webhook copies onto the pods of trials, created by
//     kube-controller-manager; and the Spark operator's SparkApplications (and the templates of
//     ScheduledSparkApplications) whose driver or executor has an init container or sidecar named
//     so, which the operator's pod webhook appends to any pod labelled with the application's
//     name, also those of a member's workloads.
//
// A namespace is managed when it carries the profiles controller's "owner" annotation and is
// none of config.ReservedNamespaces. Every namespace of a Profile carries it: the profiles
// controller writes it on the namespaces it makes, and namespaces.ownership
// ownerReferenceOrAnnotation hands over exactly those an admin annotated. It is the annotation and
// not the Profile's controller reference because an admission policy sees a namespaced request's
// Namespace (namespaceObject) with its labels and annotations only. With namespaces.ownership
// ownerReference the guard also covers annotated namespaces no Profile controls, where the runner
// does not write. None of Kubeflow's roles (kubeflow-admin, kubeflow-edit, kubeflow-view) may change
// a Namespace, so a tenant can neither leave the guard's scope nor enter it.
//
// Every policy fails closed (failurePolicy Fail) and every message says what happened and what to
// do. [Objects] renders them all, as `profile-plugins render -cluster` prints them.
package guard
