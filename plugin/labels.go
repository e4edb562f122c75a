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
	// FieldManagerPrefix starts every field manager the runner uses; the plugin's name follows.
	FieldManagerPrefix = "profile-plugins/"
)

// FieldManager is the server-side apply field manager of the named plugin.
func FieldManager(pluginName string) string { return FieldManagerPrefix + pluginName }

// IsManagedBy reports whether labels mark an object as made by the named plugin.
func IsManagedBy(labels map[string]string, pluginName string) bool {
	return labels[ManagedByLabel] == ManagedByValue && labels[PluginLabel] == pluginName
}
