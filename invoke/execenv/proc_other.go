//go:build !linux

package execenv

import (
	"os"
	"os/exec"
)

// setProcAttr: without Linux's process groups and parent-death signal, the process is only
// killed by esm itself.
func setProcAttr(*exec.Cmd) {}

// killGroup kills the process.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// maxMemoryMB is unknown outside Linux.
func (e *environment) maxMemoryMB() int { return 0 }

// unread is unknown outside Linux: the log is not waited for.
func unread(*os.File) int { return 0 }
