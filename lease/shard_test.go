package lease

// unlistedCountLocked counts the shards marked unlisted.
func (d *Dynamo) unlistedCountLocked() int {
	n := 0
	for _, s := range d.shards {
		if s.unlisted {
			n++
		}
	}
	return n
}

// missingCountLocked counts the shards read absent.
func (d *Dynamo) missingCountLocked() int {
	n := 0
	for _, s := range d.shards {
		if s.missing {
			n++
		}
	}
	return n
}
