//go:build !linux

package execenv

import "os/exec"

// containment outside Linux: no cgroups and no subreaper; the process alone is killed.
type containment struct {
	memory bool
	notice string
}

var detected = func() *containment {
	return &containment{notice: "outside Linux, only the function's own process is killed; memory is not limited (MemorySize is only reported)"}
}

type sandbox struct{ cmd *exec.Cmd }

func newSandbox(*containment, string, int) (*sandbox, error) { return &sandbox{}, nil }
func (s *sandbox) setProcAttr(cmd *exec.Cmd)                 { s.cmd = cmd }
func (s *sandbox) started(int)                               {}
func (s *sandbox) abandon()                                  {}
func (s *sandbox) intoCgroup() bool                          { return false }
func (s *sandbox) startOutside()                             {}
func (s *sandbox) adopt(int) error                           { return nil }
func (s *sandbox) killAll(bool) {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
}
func (s *sandbox) remove()           {}
func (s *sandbox) outOfMemory() bool { return false }
func (s *sandbox) peakMemoryMB() int { return 0 }

// ProtectHost does nothing outside Linux.
func ProtectHost() error { return nil }
