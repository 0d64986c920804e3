//go:build unix && !linux

package local

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the emulator in a process group of its own, so that
// killGroup reaches anything it spawns.
func setProcAttr(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return nil
}
