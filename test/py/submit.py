#!/usr/bin/env python3
"""Submit one message with smtplib: STARTTLS or implicit TLS, then AUTH.

Used by pimail's black-box tests (test/submission_clients_test.go):

  submit.py --server HOST:PORT --tls starttls|implicit --auth PLAIN|LOGIN
            --user ADDR --password PW --to ADDR --subject TEXT

The server's certificate is not checked (the tests' servers use a
self-signed one). AUTH uses exactly the given mechanism (smtplib's
login() would pick one itself). The message is From: and envelope sender
--user. Prints the server's final reply; exit status 0 on success, 1 on
any error.
"""

import argparse
import smtplib
import ssl
import sys
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

TIMEOUT = 30


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--tls", choices=["starttls", "implicit"], required=True)
    p.add_argument("--auth", choices=["PLAIN", "LOGIN"], required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--to", required=True)
    p.add_argument("--subject", required=True)
    args = p.parse_args()

    host, _, port = args.server.rpartition(":")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the test server's self-signed certificate
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2

    if args.tls == "implicit":
        s = smtplib.SMTP_SSL(host, int(port), local_hostname="client.example", timeout=TIMEOUT, context=ctx)
        s.ehlo()
    else:
        s = smtplib.SMTP(host, int(port), local_hostname="client.example", timeout=TIMEOUT)
        s.ehlo()
        if s.has_extn("auth"):
            print("AUTH offered before STARTTLS", file=sys.stderr)
            return 1
        s.starttls(context=ctx)
        s.ehlo()
    advertised = s.esmtp_features.get("auth", "").upper().split()
    if args.auth not in advertised:
        print(f"AUTH {args.auth} not offered (offered: {advertised})", file=sys.stderr)
        return 1
    s.user, s.password = args.user, args.password
    mech = {"PLAIN": s.auth_plain, "LOGIN": s.auth_login}[args.auth]
    # LOGIN has no initial response (it answers the server's prompts).
    code, resp = s.auth(args.auth, mech, initial_response_ok=(args.auth == "PLAIN"))
    if code != 235:
        print(f"AUTH {args.auth}: {code} {resp!r}", file=sys.stderr)
        return 1

    msg = EmailMessage()
    msg["From"] = args.user
    msg["To"] = args.to
    msg["Subject"] = args.subject
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = make_msgid(domain="client.example")
    msg.set_content(f"Submitted with Python's smtplib ({args.tls}, AUTH {args.auth}).\n")
    refused = s.send_message(msg, from_addr=args.user, to_addrs=[args.to])
    if refused:
        print(f"refused recipients: {refused}", file=sys.stderr)
        return 1
    print(f"sent: {args.tls} AUTH {args.auth}")
    s.quit()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (smtplib.SMTPException, OSError) as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
