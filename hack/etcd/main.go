// Command etcd runs etcd's server; it exists only so the tests can build etcd from Go modules.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
