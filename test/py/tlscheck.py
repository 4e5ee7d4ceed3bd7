#!/usr/bin/env python3
"""Log in to pimail's IMAP and POP3 over TLS with Python's imaplib and
poplib, checking the server's certificate.

Used by pimail's black-box tests (test/interop_pyimap_test.go):

  tlscheck.py --imap H:P --imaps H:P --pop3 H:P --pop3s H:P \
      --user ADDR --password PW --cafile CERT --dir DIR

CERT is the server's self-signed certificate (it names localhost and
127.0.0.1), so every handshake is verified, host name included: implicit
TLS on the IMAPS and POP3S ports (RFC 8314) and STARTTLS/STLS on the
plain ones (RFC 9051 §6.2.1, RFC 2595 §4). DIR holds the INBOX's messages
in order as 0000.eml, 0001.eml, ... (CRLF). Over each of the four
connections the script logs in (LOGIN / USER+PASS, and AUTH PLAIN over
POP3S), checks the capabilities offered after TLS (no STARTTLS/STLS any
more, LOGIN allowed) and reads every message back byte for byte (IMAP
FETCH BODY.PEEK[], POP3 RETR; TOP too over POP3S).
Exit status 0 on success, 1 on the first failed check.
"""

import argparse
import base64
import imaplib
import os
import poplib
import ssl
import sys

TIMEOUT = 30


def hostport(s):
    host, _, port = s.rpartition(":")
    return host, int(port)


def expect(cond, what, detail=None):
    if not cond:
        msg = f"FAIL: {what}"
        if detail is not None:
            msg += f"\n  got: {detail!r}"
        raise SystemExit(msg)
    print(f"ok: {what}")


def context(cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def load(d):
    names = sorted(n for n in os.listdir(d) if n.endswith(".eml"))
    out = []
    for n in names:
        with open(os.path.join(d, n), "rb") as f:
            out.append(f.read())
    return out


def check_imap(m, what, args, msgs):
    expect(m.sock.version() in ("TLSv1.2", "TLSv1.3"), f"{what}: TLS {m.sock.version()}")
    caps = [c.upper() for c in m.capabilities]
    expect("STARTTLS" not in caps and "LOGINDISABLED" not in caps, f"{what}: no STARTTLS, LOGIN allowed", caps)
    typ, data = m.login(args.user, args.password)
    expect(typ == "OK", f"{what}: LOGIN", data)
    typ, data = m.select("INBOX", readonly=True)
    expect(typ == "OK" and int(data[0]) == len(msgs), f"{what}: EXAMINE INBOX, {len(msgs)} messages", data)
    typ, data = m.fetch("1:*", "(BODY.PEEK[])")
    got = [x[1] for x in data if isinstance(x, tuple)]
    expect(typ == "OK" and got == msgs, f"{what}: FETCH 1:* BODY.PEEK[] byte for byte", (typ, len(got)))
    m.logout()


def check_pop3(p, what, args, msgs, sasl):
    expect(p.sock.version() in ("TLSv1.2", "TLSv1.3"), f"{what}: TLS {p.sock.version()}")
    caps = p.capa()
    expect("STLS" not in caps and "USER" in caps, f"{what}: CAPA has USER, no STLS", caps)
    if sasl:
        expect("PLAIN" in caps.get("SASL", []), f"{what}: CAPA SASL PLAIN", caps)
        cred = base64.b64encode(f"\0{args.user}\0{args.password}".encode()).decode()
        resp = p._shortcmd(f"AUTH PLAIN {cred}")
        expect(resp.startswith(b"+OK"), f"{what}: AUTH PLAIN (RFC 5034)", resp)
    else:
        p.user(args.user)
        resp = p.pass_(args.password)
        expect(resp.startswith(b"+OK"), f"{what}: USER/PASS", resp)
    count, size = p.stat()
    expect(count == len(msgs) and size == sum(len(m) for m in msgs), f"{what}: STAT {len(msgs)} {sum(len(m) for m in msgs)}",
           (count, size))
    for i, want in enumerate(msgs):
        _, lines, _ = p.retr(i + 1)
        expect(b"\r\n".join(lines) + b"\r\n" == want, f"{what}: RETR {i + 1} byte for byte")
    if sasl:
        _, lines, _ = p.top(1, 0)
        head = msgs[0].split(b"\r\n\r\n", 1)[0]
        expect(b"\r\n".join(lines) == head + b"\r\n", f"{what}: TOP 1 0 is the header", lines[:3])
    p.quit()


def main():
    ap = argparse.ArgumentParser()
    for a in ["imap", "imaps", "pop3", "pop3s", "user", "password", "cafile", "dir"]:
        ap.add_argument("--" + a, required=True)
    args = ap.parse_args()
    msgs = load(args.dir)
    ctx = context(args.cafile)

    # Implicit TLS, verified as "localhost" (a name in the certificate).
    _, port = hostport(args.imaps)
    check_imap(imaplib.IMAP4_SSL("localhost", port, ssl_context=ctx, timeout=TIMEOUT), "IMAPS", args, msgs)
    _, port = hostport(args.pop3s)
    check_pop3(poplib.POP3_SSL("localhost", port, context=ctx, timeout=TIMEOUT), "POP3S", args, msgs, True)

    # STARTTLS and STLS on the plain ports, verified the same way.
    _, port = hostport(args.imap)
    m = imaplib.IMAP4("localhost", port, timeout=TIMEOUT)
    expect("STARTTLS" in m.capabilities, "IMAP: STARTTLS offered", m.capabilities)
    typ, data = m.starttls(ssl_context=ctx)
    expect(typ == "OK", "IMAP: STARTTLS", data)
    check_imap(m, "IMAP STARTTLS", args, msgs)
    _, port = hostport(args.pop3)
    p = poplib.POP3("localhost", port, timeout=TIMEOUT)
    expect("STLS" in p.capa(), "POP3: STLS offered")
    expect(p.stls(context=ctx).startswith(b"+OK"), "POP3: STLS")
    check_pop3(p, "POP3 STLS", args, msgs, False)
    print("all TLS checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
