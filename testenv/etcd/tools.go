//go:build tools

// Package tools pins the etcd server the Palisade tests start.
package tools

import _ "go.etcd.io/etcd/server/v3"
