// Package ownership is the rule of which namespaces the runner writes into for a Profile: the
// namespace of the Profile's name, when the Profile controls it or (unless the configuration
// requires the owner reference) its owner annotation names the Profile's owner, and never a
// reserved one ([Policy]). A refusal is a [NamespaceError]. The platform check asks the same rule
// whether a namespace every user namespace trusts could be a user's ([Policy.Claimable]).
package ownership
