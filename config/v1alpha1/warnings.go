package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Warnings lists what in a valid configuration the admin should know although it is allowed, each
// naming the field path and value. Today: L4 exception ipBlocks wider than /16 (IPv4) or /48
// (IPv6); an onDemand provision that has no effect, or an idleAfter under a minute. `profile-plugins render` prints them on standard error; a controller should log them
// at start, as cmd/profile-plugins-controller does.
func (c *Config) Warnings() []string {
	var out []string
	for i, e := range c.Authorization.L4Exceptions {
		for j, b := range e.IPBlocks {
			if !wideIPBlock(b) {
				continue
			}
			path := field.NewPath("authorization", "l4Exceptions").Index(i).Child("ipBlocks").Index(j)
			out = append(out, fmt.Sprintf("%s: %q is a very wide range: the ztunnel policy of every user namespace admits every connection "+
				"from those addresses straight to the pods, past the waypoint and its L7 rules; mesh pods whose IPs fall in it (any user's) "+
				"are admitted too, and so is every waypoint, since connections through a waypoint come from the waypoint pod's IP; "+
				"narrow it to the addresses of the client it is for", path, b))
		}
	}
	return append(out, c.Mesh.provisionWarnings()...)
}
