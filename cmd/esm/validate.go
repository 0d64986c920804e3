package main

import (
	"cmp"
	"context"
	"fmt"

	"github.com/kinesis-esm/esm/cmd/esm/internal/cli"
)

type validateCmd struct {
	cli.TemplateFlags `embed:""`
	JSON              bool `help:"Print the resolved mappings as JSON." env:"ESM_JSON"`
}

// run checks the template and prints every Kinesis mapping it declares (only the one --function
// selects, when given). It makes no AWS call: AWS::AccountId is 000000000000 with an endpoint URL
// and sam local's 123456789012 otherwise, unless overridden.
func (v *validateCmd) run(ctx context.Context, e env) error {
	res, err := v.Resolve(ctx, false)
	if err != nil {
		return err
	}
	if res.Template == nil {
		return cli.Usage(fmt.Errorf("no %s here: pass --template FILE", cmp.Or(v.Template, cli.DefaultTemplate)))
	}
	t := res.Template
	if err := t.Narrow(v.Function); err != nil {
		return err
	}
	if v.JSON {
		return t.WriteJSON(e.stdout)
	}
	return t.WriteText(e.stdout)
}
