package lease

// countLocked counts the shards the condition holds for.
func (d *Dynamo) countLocked(cond func(*shard) bool) int {
	n := 0
	for _, s := range d.shards {
		if cond(s) {
			n++
		}
	}
	return n
}
