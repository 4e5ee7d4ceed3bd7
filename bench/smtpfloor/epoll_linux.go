package main

import (
	"fmt"
	"net/netip"
	"runtime"

	"golang.org/x/sys/unix"
)

// serveEpoll is the floor below the Go runtime's: one thread, one epoll
// set, non-blocking sockets and the same canned replies, with no
// goroutine, scheduler or timer per connection. What a session costs here
// is what the kernel's TCP work costs on this machine (accept, the reads
// and writes, the close), the least any server pays.
func serveEpoll(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("-epoll wants an IPv4 address:port, not %q", addr)
	}
	runtime.LockOSThread()
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	if err := unix.SetsockoptInt(ln, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fmt.Errorf("SO_REUSEADDR: %w", err)
	}
	if err := unix.Bind(ln, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		return fmt.Errorf("bind %s: %w", addr, err)
	}
	if err := unix.Listen(ln, 1024); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll: %w", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, ln, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(ln)}); err != nil {
		return fmt.Errorf("epoll add: %w", err)
	}
	events := make([]unix.EpollEvent, 256)
	buf := make([]byte, 4096)
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if err != nil {
			continue // EINTR
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == ln {
				acceptAll(ep, ln)
				continue
			}
			// A client of bench/smtpload sends one command and waits for
			// its reply, so one read is one line.
			m, err := unix.Read(fd, buf)
			if err == unix.EAGAIN {
				continue
			}
			if err != nil || m <= 0 {
				unix.Close(fd)
				continue
			}
			reply, quit := answer(buf[:m])
			if _, err := unix.Write(fd, reply); err != nil || quit {
				unix.Close(fd) // also leaves the epoll set
			}
		}
	}
}

// acceptAll takes every waiting connection: greeting, then into the set.
func acceptAll(ep, ln int) {
	for {
		fd, _, err := unix.Accept4(ln, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: none left
		}
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) // as Go's net does
		if _, err := unix.Write(fd, greeting); err != nil {
			unix.Close(fd)
			continue
		}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			unix.Close(fd)
		}
	}
}
