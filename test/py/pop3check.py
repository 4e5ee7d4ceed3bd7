#!/usr/bin/env python3
"""Exercise every POP3 command of pimail with Python's poplib.

Used by pimail's black-box tests (test/interop_imap_test.go):

  pop3check.py --pop3 HOST:PORT --user ADDR --password PW --dir DIR

DIR holds the messages of the maildrop, in maildrop order, as files
0000.eml, 0001.eml, ... with CRLF line endings. The script checks CAPA,
USER/PASS (a wrong password too), AUTH PLAIN (RFC 5034), APOP and STLS
(or STLS with a login over TLS when offered), STAT, LIST, UIDL (with and without an
argument), RETR and TOP against the files, NOOP, DELE, RSET, and that
QUIT commits a DELE (RFC 1939) while the other UIDs stay the same.
Prints one line per check; exit status 0 on success, 1 on any error.
"""

import argparse
import base64
import os
import poplib
import ssl
import sys

TIMEOUT = 30


def hostport(s):
    host, _, port = s.rpartition(":")
    return host, int(port)


def expect(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok: {what}")


def refused(fn, what):
    try:
        fn()
    except poplib.error_proto as e:
        expect(str(e).startswith("b'-ERR") or str(e).startswith("-ERR"), f"{what} refused ({e})")
        return
    raise SystemExit(f"FAIL: {what} accepted")


def login(args):
    host, port = hostport(args.pop3)
    p = poplib.POP3(host, port, timeout=TIMEOUT)
    p.user(args.user)
    p.pass_(args.password)
    return p


def header_of(msg):
    i = msg.find(b"\r\n\r\n")
    return msg[: i + 4] if i >= 0 else msg + b"\r\n"


def run(args):
    names = sorted(n for n in os.listdir(args.dir) if n.endswith(".eml"))
    want = []
    for n in names:
        with open(os.path.join(args.dir, n), "rb") as f:
            want.append(f.read())
    host, port = hostport(args.pop3)

    # Authorization state: CAPA, a wrong password, APOP and STLS.
    p = poplib.POP3(host, port, timeout=TIMEOUT)
    expect(p.getwelcome().startswith(b"+OK"), "greeting")
    caps = p.capa()
    for c in ("TOP", "UIDL", "USER"):
        expect(c in caps, f"CAPA lists {c}")
    refused(lambda: p._shortcmd("APOP " + args.user + " 0123456789abcdef0123456789abcdef"), "APOP")
    if "STLS" not in caps:
        refused(lambda: p._shortcmd("STLS"), "STLS without TLS")
    else:
        # RFC 2595 §4: STLS, then log in over TLS (self-signed on loopback).
        t = poplib.POP3(host, port, timeout=TIMEOUT)
        expect(t.stls(context=ssl._create_unverified_context()).startswith(b"+OK"), "STLS")
        t.user(args.user)
        t.pass_(args.password)
        expect(t.stat()[0] == len(want), "STAT over TLS")
        t.quit()
    p.user(args.user)
    refused(lambda: p.pass_("wrong-" + args.password), "PASS with a wrong password")
    p.quit()

    # AUTH PLAIN with an initial response (RFC 5034 §4).
    p = poplib.POP3(host, port, timeout=TIMEOUT)
    token = base64.b64encode(b"\0" + args.user.encode() + b"\0" + args.password.encode()).decode()
    resp = p._shortcmd("AUTH PLAIN " + token)
    expect(resp.startswith(b"+OK"), "AUTH PLAIN")
    count, size = p.stat()
    expect(count == len(want) and size == sum(map(len, want)), f"STAT after AUTH PLAIN: {count} {size}")
    p.quit()

    # Transaction state.
    p = login(args)
    expect(p.noop().startswith(b"+OK"), "NOOP")
    count, size = p.stat()
    expect(count == len(want), f"STAT count {count} == {len(want)}")
    expect(size == sum(map(len, want)), f"STAT size {size}")
    _, listing, _ = p.list()
    sizes = [int(l.split()[1]) for l in listing]
    expect(sizes == [len(m) for m in want], "LIST sizes match the messages")
    expect(p.list(1).split()[1:] == [b"1", str(len(want[0])).encode()], "LIST 1")
    _, uidls, _ = p.uidl()
    uids = [l.split()[1] for l in uidls]
    expect(len(set(uids)) == len(want), "UIDL: distinct ids")
    expect(p.uidl(2).split()[2] == uids[1], "UIDL 2 agrees with UIDL")
    for i, m in enumerate(want, 1):
        _, lines, octets = p.retr(i)
        got = b"\r\n".join(lines) + b"\r\n"
        if got != m:
            raise SystemExit(f"FAIL: RETR {i}: {len(got)} bytes differ from the {len(m)} expected")
    print(f"ok: RETR of all {len(want)} messages byte for byte")
    for i in (1, len(want)):
        _, lines, _ = p.top(i, 0)
        got = b"\r\n".join(lines) + b"\r\n"
        expect(got == header_of(want[i - 1]), f"TOP {i} 0 is the header")
        _, lines, _ = p.top(i, 2)
        body = want[i - 1][len(header_of(want[i - 1])):].split(b"\r\n")
        expect(lines[-2:] == body[:2] or len(body) < 3, f"TOP {i} 2 ends with the first two body lines")
    refused(lambda: p.retr(len(want) + 1), "RETR of a message that does not exist")

    expect(p.dele(1).startswith(b"+OK"), "DELE 1")
    refused(lambda: p.retr(1), "RETR of a deleted message")
    count, _ = p.stat()
    expect(count == len(want) - 1, "STAT leaves out the deleted message")
    expect(p.rset().startswith(b"+OK"), "RSET")
    count, _ = p.stat()
    expect(count == len(want), "RSET undeletes")
    p.dele(len(want))
    expect(p.quit().startswith(b"+OK"), "QUIT commits")

    p = login(args)
    count, _ = p.stat()
    expect(count == len(want) - 1, "the message deleted before QUIT is gone")
    _, uidls2, _ = p.uidl()
    expect([l.split()[1] for l in uidls2] == uids[:-1], "the other UIDL ids are unchanged")
    p.quit()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pop3", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--dir", required=True)
    try:
        return run(ap.parse_args())
    except (OSError, poplib.error_proto) as e:
        print(f"FAIL: {e!r}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
