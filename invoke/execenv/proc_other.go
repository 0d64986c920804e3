//go:build !linux

package execenv

import "os"

// maxMemoryMB is unknown outside Linux.
func (e *environment) maxMemoryMB() int { return 0 }

// unread is unknown outside Linux: the log is not waited for.
func unread(*os.File) int { return 0 }
