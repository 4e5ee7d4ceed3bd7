#!/usr/bin/env python3
"""SCRAM-SHA-256 logins to pimail with Python's imaplib and poplib.

Used by pimail's black-box tests (test/scram_test.go):

  scramcheck.py --imap HOST:PORT --pop3 HOST:PORT --user ADDR --password PW \
      [--expect ok|fail]

With --expect ok (the default) it checks that CAPABILITY advertises
AUTH=SCRAM-SHA-256 and CAPA advertises it under SASL, logs in with
imaplib's AUTHENTICATE (the SCRAM steps in test/py/scramclient.py, the
server's signature verified) and SELECTs INBOX, then logs in over POP3 with
AUTH SCRAM-SHA-256 (initial response, RFC 5034 §4) and runs STAT. With
--expect fail both logins must be refused (NO [AUTHENTICATIONFAILED] and
-ERR [AUTH]). Prints one line per check; exit status 0 on success.
"""

import argparse
import base64
import imaplib
import os
import poplib
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scramclient import ScramClient  # noqa: E402

TIMEOUT = 30


def hostport(s):
    host, _, port = s.rpartition(":")
    return host, int(port)


def expect(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok: {what}")


def b64(b):
    return base64.b64encode(b).decode()


def imap_login(addr, user, password):
    host, port = hostport(addr)
    m = imaplib.IMAP4(host, port, timeout=TIMEOUT)
    expect("AUTH=SCRAM-SHA-256" in m.capabilities, f"IMAP CAPABILITY has AUTH=SCRAM-SHA-256 {m.capabilities}")
    c = ScramClient(user, password)
    try:
        typ, data = m.authenticate("SCRAM-SHA-256", c.imap_authobject())
    except imaplib.IMAP4.error as e:
        m.shutdown()
        return False, str(e)
    expect(typ == "OK", f"IMAP AUTHENTICATE SCRAM-SHA-256 -> {typ} {data}")
    expect(c.server_signature is not None, "IMAP server signature checked")
    typ, data = m.select("INBOX")
    expect(typ == "OK", f"SELECT INBOX after SCRAM -> {data}")
    m.logout()
    return True, ""


def pop3_login(addr, user, password):
    host, port = hostport(addr)
    p = poplib.POP3(host, port, timeout=TIMEOUT)
    caps = p.capa()
    expect("SCRAM-SHA-256" in caps.get("SASL", []), f"POP3 CAPA SASL has SCRAM-SHA-256 {caps.get('SASL')}")
    c = ScramClient(user, password)
    try:
        # poplib has no SASL: _shortcmd returns any "+..." line, so the
        # "+ challenge" continuations come back like +OK.
        r = p._shortcmd("AUTH SCRAM-SHA-256 " + b64(c.client_first()))
        expect(r.startswith(b"+ "), f"POP3 server-first challenge {r[:40]!r}")
        r = p._shortcmd(b64(c.client_final(base64.b64decode(r[2:]))))
        expect(r.startswith(b"+ "), f"POP3 server-final challenge {r[:40]!r}")
        c.verify(base64.b64decode(r[2:]))
        print("ok: POP3 server signature checked")
        r = p._shortcmd("")  # empty response to the server-final challenge
    except poplib.error_proto as e:
        p.quit()
        return False, str(e)
    expect(r.startswith(b"+OK"), f"POP3 AUTH SCRAM-SHA-256 -> {r!r}")
    count, size = p.stat()
    print(f"ok: POP3 STAT after SCRAM: {count} messages, {size} octets")
    p.quit()
    return True, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--imap", required=True)
    ap.add_argument("--pop3", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--expect", choices=["ok", "fail"], default="ok")
    a = ap.parse_args()
    ok, err = imap_login(a.imap, a.user, a.password)
    if a.expect == "ok":
        expect(ok, f"IMAP SCRAM login {err}")
    else:
        expect(not ok and "AUTHENTICATIONFAILED" in err, f"IMAP SCRAM login refused: {err}")
    ok, err = pop3_login(a.pop3, a.user, a.password)
    if a.expect == "ok":
        expect(ok, f"POP3 SCRAM login {err}")
    else:
        expect(not ok and "-ERR [AUTH]" in err, f"POP3 SCRAM login refused: {err}")


if __name__ == "__main__":
    main()
