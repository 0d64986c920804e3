// Package procenv gives a function run in this process its template's environment. A Go handler
// invoked in process reads the process's environment, which the program owns: only the programs'
// entry points call Set (the esm command, and handler/inproc.Run, which runs a mapping as its
// program's work); the libraries (runner, invoke) write no process environment.
package procenv

import (
	"fmt"
	"os"
)

// Set sets each of env's variables that the process's environment does not set already (the real
// environment wins, as a command's flags do). The process has one environment for all its
// functions.
func Set(env map[string]string) error {
	for k, v := range env {
		if _, set := os.LookupEnv(k); set {
			continue
		}
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("set %s from the template: %w", k, err)
		}
	}
	return nil
}
