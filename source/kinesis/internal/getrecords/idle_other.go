//go:build !unix

package getrecords

import "syscall"

// wireSupported: without a way to tell a closed idle connection, the lean path sends through
// the SDK's HTTP client.
const wireSupported = false

func idle(syscall.RawConn) bool { return false }
