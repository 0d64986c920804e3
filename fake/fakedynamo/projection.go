package fakedynamo

import "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

// parseProjection parses a projection expression into paths.
func parseProjection(s string, e *env) ([]path, error) {
	p, err := newParser(s, e)
	if err != nil {
		return nil, err
	}
	var out []path
	for {
		pa, err := p.parsePath()
		if err != nil {
			return nil, err
		}
		out = append(out, pa)
		if p.peek().kind == tEOF {
			return out, nil
		}
		if err := p.expect(tComma, ","); err != nil {
			return nil, err
		}
	}
}

// project keeps only the paths of an item (top-level attributes and nested elements).
func project(item map[string]types.AttributeValue, paths []path) map[string]types.AttributeValue {
	if paths == nil {
		return item
	}
	out := map[string]types.AttributeValue{}
	for _, pa := range paths {
		v := lookup(item, pa)
		if v == nil {
			continue
		}
		if len(pa) == 1 {
			out[pa[0].name] = v
			continue
		}
		// Nested: keep the element inside its parents (list indexes collapse, as DynamoDB does).
		_ = setPathCreate(out, pa, v)
	}
	return out
}
