package cli

import (
	"errors"
	"fmt"

	"github.com/kinesis-esm/esm/checkpoint"
	"github.com/kinesis-esm/esm/sam"
)

// templateInputs are the flags that give the inputs a template's messages tell the user to change
// (the library names them by their Go names).
var templateInputs = map[sam.Input]string{
	sam.InputParameterOverrides: "--parameter-overrides",
	sam.InputRegion:             "--region",
	sam.InputSelector:           "--function",
}

// StateDirInUse adds what to do about a state directory another process holds (checkpoint.ErrLocked):
// the library says whose it is, the command which flag picks another.
func StateDirInUse(err error) error {
	if errors.Is(err, checkpoint.ErrLocked) {
		return fmt.Errorf("%w; stop that process or pass a different --state-dir", err)
	}
	return err
}
