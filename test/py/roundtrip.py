#!/usr/bin/env python3
"""Send messages with smtplib and read them back with imaplib.

Used by pimail's black-box tests (test/roundtrip_test.go):

  roundtrip.py send  --smtp HOST:PORT --sender ADDR --to A,B,C FILE...
  roundtrip.py fetch --imap HOST:PORT --user ADDR --password PW --out DIR

`send` sends every FILE as is (the files already have CRLF line endings)
to all recipients in one transaction each, with BODY=8BITMIME when a file
has 8-bit octets, and fails on any refused recipient or error reply.
`fetch` logs in, examines INBOX and writes each message's BODY.PEEK[] to
DIR/<uid>.eml. Exit status 0 on success, 1 on any error.
"""

import argparse
import imaplib
import os
import re
import smtplib
import sys

TIMEOUT = 30


def hostport(s):
    host, _, port = s.rpartition(":")
    return host, int(port)


def send(args):
    host, port = hostport(args.smtp)
    rcpts = [r for r in args.to.split(",") if r]
    with smtplib.SMTP(host, port, local_hostname="client.example", timeout=TIMEOUT) as s:
        s.ehlo()
        for path in args.files:
            with open(path, "rb") as f:
                data = f.read()
            opts = []
            if any(b > 127 for b in data):
                if not s.has_extn("8bitmime"):
                    raise SystemExit("server does not offer 8BITMIME")
                opts.append("BODY=8BITMIME")
            refused = s.sendmail(args.sender, rcpts, data, mail_options=opts)
            if refused:
                raise SystemExit(f"{path}: refused recipients {refused}")
            s.rset()
            print(f"sent {os.path.basename(path)} ({len(data)} bytes)")
    return 0


FETCH_RE = re.compile(rb"UID (\d+)")


def fetch(args):
    host, port = hostport(args.imap)
    os.makedirs(args.out, exist_ok=True)
    m = imaplib.IMAP4(host, port, timeout=TIMEOUT)
    try:
        typ, data = m.login(args.user, args.password)
        if typ != "OK":
            raise SystemExit(f"LOGIN: {typ} {data}")
        typ, data = m.select("INBOX", readonly=True)
        if typ != "OK":
            raise SystemExit(f"EXAMINE INBOX: {typ} {data}")
        exists = int(data[0])
        count = 0
        if exists > 0:
            typ, data = m.uid("FETCH", "1:*", "(UID BODY.PEEK[])")
            if typ != "OK":
                raise SystemExit(f"UID FETCH: {typ} {data}")
            for i, item in enumerate(data):
                if not isinstance(item, tuple):
                    continue
                meta, body = item
                uid = FETCH_RE.search(meta)
                if uid is None and i + 1 < len(data) and isinstance(data[i + 1], bytes):
                    uid = FETCH_RE.search(data[i + 1])  # UID after the literal
                if uid is None:
                    raise SystemExit(f"FETCH response without UID: {meta!r}")
                with open(os.path.join(args.out, uid.group(1).decode() + ".eml"), "wb") as f:
                    f.write(body)
                count += 1
        if count != exists:
            raise SystemExit(f"INBOX has {exists} messages, FETCH returned {count}")
        print(f"fetched {count} messages for {args.user}")
        m.logout()
    finally:
        try:
            m.shutdown()
        except OSError:
            pass
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    ps = sub.add_parser("send")
    ps.add_argument("--smtp", required=True)
    ps.add_argument("--sender", required=True)
    ps.add_argument("--to", required=True)
    ps.add_argument("files", nargs="+")
    pf = sub.add_parser("fetch")
    pf.add_argument("--imap", required=True)
    pf.add_argument("--user", required=True)
    pf.add_argument("--password", required=True)
    pf.add_argument("--out", required=True)
    args = p.parse_args()
    try:
        return send(args) if args.cmd == "send" else fetch(args)
    except (smtplib.SMTPException, imaplib.IMAP4.error, OSError) as e:
        print(f"{args.cmd}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
