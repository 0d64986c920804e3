//go:build unix

package getrecords

import "syscall"

// wireSupported: idle can tell a closed connection here.
const wireSupported = true

// idle reports whether the kept-alive connection raw is still open and has nothing to read, as
// an idle HTTP/1.1 connection must: net/http's transport reads each idle connection and drops one
// the server closed or wrote to, and this looks (a peek that does not wait) before a reuse
// instead.
func idle(raw syscall.RawConn) bool {
	var buf [1]byte
	open := false
	err := raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n <= 0 && (err == syscall.EAGAIN || err == syscall.EWOULDBLOCK)
		return true // done: never wait for the socket to be readable
	})
	return err == nil && open
}
