package sam

// Input is one of the caller's inputs that a message tells the user to change: a template error
// says "pass <input> Name=..." rather than a flag of one command. WithInputNames gives the
// caller's own names (the esm command's flags); by default an input is called by its Go name.
type Input int

// The inputs a message can name.
const (
	// InputParameterOverrides is WithParameterOverrides.
	InputParameterOverrides Input = iota + 1
	// InputRegion is WithRegion.
	InputRegion
	// InputSelector is the selector given to Template.Select.
	InputSelector
)

// String is the input's default name in messages.
func (i Input) String() string {
	switch i {
	case InputParameterOverrides:
		return "WithParameterOverrides"
	case InputRegion:
		return "WithRegion"
	case InputSelector:
		return "the selector"
	}
	return "an input"
}

// name is what messages call input: the caller's name for it, or its default.
func (o options) name(i Input) string {
	if n, ok := o.inputNames[i]; ok && n != "" {
		return n
	}
	return i.String()
}
