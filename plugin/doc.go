// Package plugin is the contract between the runner and the generators it runs (this module's
// waypoint, authz and pss, or one of your own): what a generator is given, what it returns, and
// the names the runner marks its writes with. Nothing here runs.
//
// # What a plugin is
//
// A [Plugin] is pure. Given a [Target] (the namespace, its Profile, and the state the runner
// observed there, [Observed]), Generate returns a [Desired]: typed objects in that namespace and
// the namespace labels the plugin owns. It never calls the API server: everything it may depend on
// is in the Target, and the same Target gives the same Desired. Kinds names every type the plugin
// may emit in any configuration, so that what an earlier configuration made can still be found
// and pruned. A plugin says more by implementing optional interfaces: [PodObserver] and
// [PodDemand] when its decisions depend on the running pods, [EndpointObserver] when they depend on
// whether the namespace serves anything, [DataPlane] when its labels put pods into a data plane,
// [PodProtector] when some of its objects protect running pods whatever the labels say,
// [AdmissionGuard] when its labels decide what the API server admits, and [CacheDeclarer] when a
// controller's cache should hold only part of a kind it emits or reads (only the plugins' own
// ConfigMaps, trimmed: [OwnedConfigMaps]). The runner knows no plugin: each of these is all it
// learns of one.
//
// # What the runner promises
//
// The runner turns a Desired into API calls that are safe to repeat:
//
//   - every object is written with server-side apply under the plugin's own field manager
//     ([FieldManager]), labelled with [ManagedByLabel] and [PluginLabel], and controlled by the
//     Profile; in the next call's Observed, [Lookup] finds it, status included;
//   - an object another writer made under a wanted name is left alone and reported as a conflict,
//     unless the plugin names it in [Desired.Adopt];
//   - the labels of every plugin go out in one write under [LabelFieldManager]: a label the
//     plugin stops wanting is removed, one another writer also set stays, and
//     Observed.LabelManagers tells the plugin's own labels from other writers';
//   - what the plugin made earlier and no longer wants is deleted;
//   - nothing is written when the observed state already matches;
//   - an error from Generate touches nothing of the plugin; [Desired.Errors] are reported while
//     the safe state the plugin fell back to is applied. Both count as [ErrInput]: reconciling
//     again without a change gives the same error.
//
// # The safety model in short
//
// A label is set only where its protection stands. [Desired.LabelRequires] names the objects
// each label requires, and the runner sets or keeps the label only while every one of them
// exists, carries its plugin's labels and is intact: its desired fields hold their values and
// nobody else holds content the plugin does not set. Another writer's change is restored in the
// same call and reported. Labels that send traffic somewhere ([Desired.Enrolment]) come off
// before the objects they route to change, objects are written before any label enrols the
// namespace, and stale objects go last. A data-plane label ([DataPlane]) stays while pods it
// captures run, and objects a [PodProtector] names stay while their pods run.
// [Desired.CreateRequires] holds an object back until what it requires protects, and
// [Desired.ReadyFromStatus] makes the labels that require an object judged by its status wait a
// call after the runner changed it.
//
// Package [github.com/kubeflow-ambient/profile-plugins/runner] has the details: the phases of one
// call, transitions between data planes, kinds the API server does not serve, and which
// namespaces are a Profile's to write into.
package plugin
