//go:build !linux

package main

import "errors"

func serveEpoll(string) error { return errors.New("-epoll needs Linux") }
