//go:build unix

package local

import (
	"errors"
	"os"
	"syscall"
)

// killGroup sends SIGKILL to the process group led by p. A group that is
// already gone is not an error.
func killGroup(p *os.Process) error {
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
