// etcd, built from its published Go module (go.etcd.io/etcd/server/v3) for the tests' control
// plane: the same entry point as the etcd release binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
