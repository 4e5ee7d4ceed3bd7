#!/usr/bin/env python3
"""Rewrite messages the way offlineimap3 stores them in a Maildir.

Used by pimail's black-box tests (test/offlineimap_test.go):

  emailrewrite.py DIR

offlineimap3 does not store the bytes it fetched: it parses each message
with Python's email package (policy.default, cte_type 8bit, utf8,
refold_source none, CRLF) and writes msg.as_bytes() with the same policy
and LF line endings (offlineimap/folder/Base.py, IMAP.py, Maildir.py).
For every file DIR/NAME.eml this writes DIR/NAME.out with that result, so
that the test can tell offlineimap's own rewriting (for example a header
value's leading white space dropped) from a change made by the server.
Exit status 0 on success, 1 on any error.
"""

import os
import sys
from email import policy
from email.parser import BytesParser

IN = policy.default.clone(cte_type="8bit", utf8=True, refold_source="none", linesep="\r\n")
OUT = policy.default.clone(cte_type="8bit", utf8=True, refold_source="none")


def main():
    d = sys.argv[1]
    for name in sorted(os.listdir(d)):
        if not name.endswith(".eml"):
            continue
        with open(os.path.join(d, name), "rb") as f:
            msg = BytesParser(policy=IN).parsebytes(f.read())
        with open(os.path.join(d, name[:-4] + ".out"), "wb") as f:
            f.write(msg.as_bytes(policy=OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
