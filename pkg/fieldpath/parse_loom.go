//go:build !fieldpath_upstream

package fieldpath

func parse(path string) (Segments, error) { return parseLoom(path) }
