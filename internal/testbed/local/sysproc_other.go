//go:build !unix

package local

import (
	"errors"
	"os"
	"os/exec"
)

// setProcAttr refuses to start emulators: process groups are Unix-only.
func setProcAttr(*exec.Cmd) error {
	return errors.ErrUnsupported
}

func killGroup(p *os.Process) error {
	return p.Kill()
}
