package plugin

// GVKFor exposes gvkFor to the external tests.
var GVKFor = gvkFor
