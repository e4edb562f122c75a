// Package guard is the admission guard: ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1,
// served since Kubernetes 1.30, no webhook server to run) and their bindings that refuse, in the
// namespaces the plugins manage, what the runner could only repair after the fact, and what it
// cannot repair at all.
//
// The guard is a registry of checks ([Checks]): each [Check] has an ID, the [Asset] of the trust
// model it protects (docs/security/threat-model.md), the mesh modes it applies in, who passes it,
// the upstream source it rests on, its CEL and its message, which opens with the ID. [Objects]
// renders the registry as policies, one per kind of request, as `profile-plugins render -cluster`
// prints them; docs/security/checks.md is generated from it.
//
// Every policy trusts the controller's ServiceAccount (guard.controllerServiceAccount), the
// break-glass group (guard.breakGlassGroup) and system:masters (which no authorizer refuses
// anything, deleting the guard included); all but the pods policy trust Kubernetes' own
// controllers too (kube-system's ServiceAccounts and system:kube-controller-manager, which delete a
// namespace's objects and garbage). The policies:
//
//   - [ManagedObjectsPolicy]: the plugins' objects, their labels and reserved names. A
//     contributor's policy may be deleted (kfam does when a contributor is removed): it only grants.
//   - [NamespaceLabelsPolicy]: the enrolment, mesh and Pod Security labels and the owner annotation.
//   - [WaypointPolicy]: the waypoint's workload and identity. Only istiod (guard.meshServiceAccounts),
//     Kubernetes' controllers, the kubelets and the scheduler create, change or delete its
//     Deployment, Service, autoscaler, disruption budget, endpoints and pods; no other pod or pod
//     template runs as its ServiceAccount or carries the labels its Service selects; nobody execs,
//     attaches, port-forwards or proxies to it; no token of its ServiceAccount is requested or put in
//     a Secret. In both mesh modes, whether a waypoint exists or not.
//   - [MeshConfigPolicy]: Istio's and the Gateway API's configuration that could widen a namespace
//     or skip its waypoint, unless the admin allows the object by name (guard.meshConfigAllowed),
//     and ALLOW policies by anyone but guard.policyWriters (kfam, the stock profiles controller).
//   - [PodsPolicy]: every pod created in a managed namespace, whoever creates it, as the mutating
//     webhooks left it (validating admission runs after them): a pod a ReplicaSet or Job
//     controller creates is refused like a user's, and its controller reports the refusal in
//     its events (FailedCreate). The waypoint's own pods, which opt out by istiod's template, are
//     the waypoint policy's.
//   - [WorkloadsPolicy], [CronJobsPolicy]: the same checks on pod templates, so a user hears of a
//     refusal when applying the workload. In sidecar mode Katib's suggestion Deployment
//     (guard.katibControllerServiceAccount, controlled by a Suggestion) and kube-controller-manager's
//     pods of it may carry Katib's sidecar.istio.io/inject=false, and no other template, PodDefault,
//     Experiment or Trial Katib's suggestion labels.
//   - [ServicesPolicy]: routing labels on Services, and endpoints naming another namespace's pods.
//   - [BindingsPolicy]: Bindings that would copy Istio's labels or annotations onto a pod.
//   - [KubeflowPolicy]: Kubeflow's objects whose controllers or webhooks copy a tenant's input into
//     what Istio reads (PodDefaults, Notebooks, Katib's Experiments and Trials, SparkApplications):
//     refused when created, before a pod would be.
//
// A namespace is managed when it carries the profiles controller's "owner" annotation, not empty,
// and is none of config.ReservedNamespaces. Every namespace of a Profile carries it: the profiles
// controller writes it on the namespaces it makes, and namespaces.ownership
// ownerReferenceOrAnnotation hands over exactly those an admin annotated. It is the annotation and
// not the Profile's controller reference because an admission policy sees a namespaced request's
// Namespace (namespaceObject) with its labels and annotations only. None of Kubeflow's roles
// (kubeflow-admin, kubeflow-edit, kubeflow-view) may change a Namespace, so a tenant can neither
// leave the guard's scope nor enter it.
//
// Every policy fails closed (failurePolicy Fail) and every message says what happened and what to
// do.
package guard
