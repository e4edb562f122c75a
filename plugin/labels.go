package plugin

const (
	// ManagedByLabel is set on every object the runner writes, with value [ManagedByValue].
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is this library's value of [ManagedByLabel].
	ManagedByValue = "profile-plugins"
	// PluginLabel names the plugin that made an object; together with [ManagedByLabel] it is how
	// the runner tells its own objects from everyone else's.
	PluginLabel = "profile-plugins.kubeflow-ambient.io/plugin"
	// DesiredHashAnnotation holds a hash of what the plugin last asked for. When a field leaves
	// the desired object, the hash changes, so the runner re-applies and server-side apply removes
	// the field; comparing fields alone would miss removals.
	DesiredHashAnnotation = "profile-plugins.kubeflow-ambient.io/desired-hash"
	// FieldManagerPrefix starts the field manager of each plugin's objects; the plugin's name follows.
	FieldManagerPrefix = "profile-plugins/"
	// LabelFieldManager applies every plugin's namespace labels, in one write per call.
	// [LabelOwnersAnnotation] says which plugin each of its labels belongs to. Releases before it
	// applied each plugin's labels under [FieldManager]; the first write takes those over.
	LabelFieldManager = "profile-plugins"
	// LabelOwnersAnnotation is written with the namespace labels by [LabelFieldManager]: a JSON
	// object from plugin name to the sorted label keys it owns, such as
	// {"pss":["pod-security.kubernetes.io/enforce"]}. It only attributes: a key counts as a
	// plugin's while LabelFieldManager owns both the label and the annotation in managedFields.
	LabelOwnersAnnotation = "profile-plugins.kubeflow-ambient.io/label-owners"
	// ProtectionFinalizer is set on the objects a data-plane label requires (see [DataPlane]) in a
	// namespace the Profile controls. Garbage collection deletes the Profile's dependents all at
	// once when the Profile goes, the ztunnel policy among them, while the pods it protects may
	// still be terminating; the finalizer keeps the object until no such pod remains, and the
	// runner removes it then.
	ProtectionFinalizer = "profile-plugins.kubeflow-ambient.io/protects-pods"
)

// FieldManager is the server-side apply field manager of the named plugin.
func FieldManager(pluginName string) string { return FieldManagerPrefix + pluginName }

// IsManagedBy reports whether labels mark an object as made by the named plugin.
func IsManagedBy(labels map[string]string, pluginName string) bool {
	return labels[ManagedByLabel] == ManagedByValue && labels[PluginLabel] == pluginName
}
