// Command smtpfloor is the least an SMTP server can do for a session: it
// answers every command with a canned reply and stores nothing. Run
// bench/smtpload against it with -bounces 1 to measure the floor of a
// session refused at RCPT on this machine: the CPU that the kernel's TCP
// work and the Go runtime's network code cost a server before it parses,
// logs or checks anything.
//
//	go run ./bench/smtpfloor -listen 127.0.0.1:2599 &
//	go run ./bench/smtpload -smtp 127.0.0.1:2599 -pids $! -conns 50 -per-conn 1 -duration 8s -bounces 1
//
// With -epoll (Linux) it serves from one thread over a raw epoll set
// instead of a goroutine per connection: the floor of any server, what
// the kernel's TCP work alone costs a session on this machine.
//
// Every RCPT gets 550 (RFC 5321 §4.2.2, mailbox unavailable), every DATA
// 554 (no valid recipients), QUIT 221 and the close; anything else 250.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"log"
	"net"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:2599", "address to listen on")
	epoll := flag.Bool("epoll", false, "one thread over a raw epoll set (Linux) instead of a goroutine per connection")
	flag.Parse()
	if *epoll {
		log.Fatal(serveEpoll(*addr))
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Print(err)
			continue
		}
		go serve(c)
	}
}

// The replies are allocated once, so that a session costs only its I/O.
var (
	greeting = []byte("220 floor ESMTP\r\n")
	okReply  = []byte("250 2.0.0 ok\r\n")
	quitVerb = []byte("QUIT")
)

var replies = []struct{ verb, reply []byte }{
	{[]byte("EHLO"), []byte("250-floor\r\n250-PIPELINING\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n")},
	{[]byte("RCPT"), []byte("550 5.1.1 no such user\r\n")},
	{[]byte("DATA"), []byte("554 5.5.1 no valid recipients\r\n")},
	{quitVerb, []byte("221 2.0.0 bye\r\n")},
}

func serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := c.Write(greeting); err != nil {
		return
	}
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		reply, quit := answer(line)
		if _, err := c.Write(reply); err != nil || quit {
			return
		}
	}
}

// answer is the canned reply to a command line, and whether it ends the
// session.
func answer(line []byte) (reply []byte, quit bool) {
	for _, v := range replies {
		if len(line) >= 4 && bytes.EqualFold(line[:4], v.verb) {
			return v.reply, bytes.Equal(v.verb, quitVerb)
		}
	}
	return okReply, false
}
