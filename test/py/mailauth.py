"""Debian's dkimpy and authres as judges of mail pimail wrote (issue 22).

Reads JSON on stdin: {"mode": "arc"|"dkim"|"authres", "dns": "host:port",
"msgs": [base64 message, ...]} and prints one line per message:
  arc:     the chain status (pass/fail/none) and dkimpy's comment
  dkim:    one word per DKIM-Signature, pass or fail, in header order
  authres: "ok" when every Authentication-Results field parses, else ERR
DNS questions go to the test's server on 127.0.0.1 (dnspython).
"""
import base64
import json
import sys

import authres
import dkim
import dns.resolver

req = json.load(sys.stdin)
host, port = req["dns"].rsplit(":", 1)
res = dns.resolver.Resolver(configure=False)
res.nameservers = [host]
res.port = int(port)


def dnsfunc(name, timeout=5):
    try:
        answer = res.resolve(name.decode().rstrip("."), "TXT", lifetime=timeout)
    except Exception:
        return None
    for r in answer:
        return b"".join(r.strings)
    return None


for b64 in req["msgs"]:
    msg = base64.b64decode(b64)
    headers, _ = dkim.rfc822_parse(msg)
    if req["mode"] == "arc":
        cv, _, comment = dkim.arc_verify(msg, dnsfunc=dnsfunc)
        print(cv.decode(), comment)
    elif req["mode"] == "dkim":
        d = dkim.DKIM(msg)
        n = len([1 for k, _ in headers if k.lower() == b"dkim-signature"])
        print(" ".join("pass" if d.verify(idx=i, dnsfunc=dnsfunc) else "fail" for i in range(n)) or "none")
    else:
        errs = []
        for k, v in headers:
            if k.lower() != b"authentication-results":
                continue
            value = v.decode("ascii").replace("\r\n", "").replace("\n", "")
            try:
                authres.AuthenticationResultsHeader.parse("Authentication-Results:" + value)
            except Exception as e:
                errs.append("%r: %s" % (value, e))
        print("ok" if not errs else "ERR " + "; ".join(errs))
