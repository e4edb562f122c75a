package main

import rbacv1 "k8s.io/api/rbac/v1"

func rbacUser(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}
