package runner

// GVKFor exposes gvkFor to the external tests.
var GVKFor = gvkFor
