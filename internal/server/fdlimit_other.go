//go:build !unix

package server

func fileLimit() (uint64, bool) { return 0, false }
