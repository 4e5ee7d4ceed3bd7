#!/usr/bin/env python3
"""Regression checks for what Dovecot's imaptest found in pimail (issue
23), with Python's imaplib.

Used by pimail's black-box tests (test/imapconform_test.go):

  imapconform.py --imap HOST:PORT --user ADDR --password PW --recent N
                 [--keep-going]

The account must be new apart from N messages in INBOX that were
appended before the server was last restarted, with nobody having
selected INBOX since. Each check prints one line; the exit status is 0
when all pass. --keep-going runs every check and counts the failures
(to show which ones an older server fails).

The checks, one group per finding of the issue:
  atoms      "[" is an ATOM-CHAR: SELECT/CREATE/LIST of foo[bar (RFC 3501 §9)
  binary     APPEND of a binary part as literal8: BODY[1] carries no NUL,
             BINARY[1] the octets (RFC 3516)
  esearch    RETURN (MIN)/(MAX) with MODSEQ: the returned message's MODSEQ
             (RFC 4731 §3.2)
  listext    RECURSIVEMATCH alone is BAD, CHILDINFO with SUBSCRIBED (RFC 5258)
  lsub       LSUB's \\Noselect parent under "%" (RFC 3501 §6.3.9)
  recent     \\Recent in exactly one session, persisted across a restart
             (RFC 3501 §2.3.2)
  subscribe  subscriptions apart from existence (RFC 3501 §6.3.6),
             special-use mailboxes subscribed from the start
  flags      FLAGS and PERMANENTFLAGS announce new keywords (RFC 3501 §7.2.6)
and the extensions added with it: ESORT and CONTEXT=SEARCH/SORT (RFC 5267),
CATENATE (RFC 4469), NOTIFY (RFC 5465), and OBJECTID (RFC 8474): MAILBOXID
in CREATE, SELECT, STATUS and LIST-STATUS, kept by RENAME and never handed
out again; EMAILID kept by COPY and MOVE, SEARCH EMAILID; THREADID NIL.
"""

import argparse
import os
import re
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imapext import connect, raw, read_tagged  # noqa: E402

failures = 0
keep_going = False


def expect(cond, what, detail=None):
    global failures
    if cond:
        print(f"ok: {what}")
        return True
    msg = f"FAIL: {what}"
    if detail is not None:
        msg += f"\n  got: {detail!r}"
    if not keep_going:
        raise SystemExit(msg)
    print(msg)
    failures += 1
    return False


def cmd(m, text, literal=None):
    return raw(m, text, literal)


def must(m, text, what, literal=None):
    st, lines = cmd(m, text, literal)
    expect(st.startswith("OK"), what, (st, lines[:6]))
    return lines


def plain(subject, body="body\r\n", frm="a@test.local"):
    return (f"From: {frm}\r\nTo: b@test.local\r\nSubject: {subject}\r\n\r\n{body}").encode()


def append(m, mailbox, data, flags=""):
    f = f"({flags}) " if flags else ""
    return must(m, f"APPEND {mailbox} {f}{{{len(data)}+}}", f"APPEND to {mailbox}", data)


def check_atoms(m):
    st, _ = cmd(m, "SELECT foo[bar")
    expect(st.startswith("NO"), "SELECT foo[bar of a missing mailbox: NO, not BAD", st)
    must(m, "CREATE foo[bar", "CREATE foo[bar")
    st, lines = cmd(m, 'LIST "" foo[bar')
    expect(st.startswith("OK") and any(l.endswith((" foo[bar", ' "foo[bar"')) for l in lines), "LIST finds foo[bar", lines)
    st, _ = cmd(m, "LIST \"\" !#$&'+,-.0123456789:;<=>?@^_`|[}%*")
    expect(st.startswith("OK"), "LIST with every ATOM-CHAR in its pattern", st)
    must(m, "SELECT foo[bar", "SELECT foo[bar")
    must(m, "UNSELECT", "UNSELECT")


def check_binary(m):
    must(m, "CREATE bin", "CREATE bin")
    part = b"\x00-\xe4\r\n\r\n"
    data = (b"From: user@domain.org\r\nMime-Version: 1.0\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Transfer-Encoding: binary\r\n\r\n" + part)
    st, lines = cmd(m, f"APPEND bin ~{{{len(data)}+}}", data)
    expect(st.startswith("OK"), "APPEND of a binary message as literal8", st)
    must(m, "SELECT bin", "SELECT bin")
    st, lines = cmd(m, "FETCH 1 (BODY.PEEK[1] BINARY.SIZE[1])")
    body = "\n".join(lines)
    expect(st.startswith("OK") and "\x00" not in body and "AC3kDQoNCg==" in body,
           "BODY[1] of it: base64, no NUL (RFC 3516 §4.2)", lines)
    expect("BINARY.SIZE[1] 7" in body, "BINARY.SIZE[1] is the appended size", lines)
    tag = m._new_tag().decode()
    m.send(f"{tag} FETCH 1 (BINARY.PEEK[1])\r\n".encode())
    head = m.readline()
    n = re.search(rb"~\{(\d+)\}\r\n$", head)
    got = m.read(int(n.group(1))) if n else b""
    m.readline()
    read_tagged(m, tag)
    expect(got == part, "BINARY[1] returns the appended octets as literal8", (head, got))
    must(m, "UNSELECT", "UNSELECT")


def check_esearch_modseq(m):
    must(m, "CREATE es", "CREATE es")
    for i in range(4):
        append(m, "es", plain(f"es{i}"))
    must(m, "SELECT es (CONDSTORE)", "SELECT es (CONDSTORE)")
    mod = {}
    for n in (1, 3, 2, 4):
        lines = must(m, f"STORE {n} +FLAGS (\\Seen)", f"STORE {n} +FLAGS \\Seen")
        mod[n] = int(re.search(r"MODSEQ \((\d+)\)", " ".join(lines)).group(1))
    _, lines = cmd(m, 'SEARCH RETURN (MIN) 1:3 MODSEQ "/flags/\\\\seen" all 1')
    expect(any(l.endswith(f"MIN 1 MODSEQ {mod[1]}") for l in lines),
           "ESEARCH MIN with MODSEQ: the MODSEQ of message 1", (lines, mod))
    _, lines = cmd(m, 'SEARCH RETURN (MAX) 1:3 MODSEQ "/flags/\\\\seen" all 1')
    expect(any(l.endswith(f"MAX 3 MODSEQ {mod[3]}") for l in lines),
           "ESEARCH MAX with MODSEQ: the MODSEQ of message 3", (lines, mod))
    _, lines = cmd(m, "SEARCH RETURN (COUNT) 1:3 MODSEQ 1")
    expect(any(l.endswith(f"COUNT 3 MODSEQ {max(mod[1], mod[2], mod[3])}") for l in lines),
           "ESEARCH COUNT with MODSEQ: the highest of all", lines)
    must(m, "UNSELECT", "UNSELECT")


def check_listext(m):
    for q in ('LIST (RECURSIVEMATCH) "" ""', 'LIST (RECURSIVEMATCH REMOTE) "" "*"'):
        st, _ = cmd(m, q)
        expect(st.startswith("BAD"), f"{q}: BAD (RFC 5258 §3)", st)
    must(m, "CREATE lx/a", "CREATE lx/a")
    must(m, "SUBSCRIBE lx/a", "SUBSCRIBE lx/a")
    _, lines = cmd(m, 'LIST (SUBSCRIBED RECURSIVEMATCH) "" "lx%"')
    expect(any(l.startswith('* LIST (') and ' lx ("CHILDINFO" ("SUBSCRIBED"))' in l for l in lines),
           "RECURSIVEMATCH: the unsubscribed parent with CHILDINFO (SUBSCRIBED)", lines)
    expect(not any(l.endswith(" lx/a") for l in lines), "RECURSIVEMATCH: the child the pattern misses not listed", lines)


def check_lsub(m):
    must(m, "CREATE qq/child", "CREATE qq/child")
    must(m, "SUBSCRIBE qq/child", "SUBSCRIBE qq/child")
    must(m, "UNSUBSCRIBE qq", "UNSUBSCRIBE qq")
    _, lines = cmd(m, 'LSUB "" qq%')
    expect(lines == ['* LSUB (\\Noselect) "/" qq'], 'LSUB "" qq%: the parent with \\Noselect', lines)
    _, lines = cmd(m, 'LSUB "" qq*')
    expect(lines == ['* LSUB () "/" qq/child'], 'LSUB "" qq*: only the subscribed child', lines)


def check_recent(args, m, n):
    _, lines = cmd(m, "STATUS INBOX (MESSAGES RECENT)")
    expect(lines == [f"* STATUS INBOX (MESSAGES {n} RECENT {n})"],
           f"STATUS RECENT {n}: mail appended while nobody had INBOX selected, across a restart", lines)
    _, lines = cmd(m, "EXAMINE INBOX")
    expect(f"* {n} RECENT" in lines, f"EXAMINE shows {n} RECENT and claims none", lines)
    _, lines = cmd(m, "SELECT INBOX")
    expect(f"* {n} RECENT" in lines, f"SELECT shows {n} RECENT", lines)
    _, lines = cmd(m, "SEARCH RECENT")
    expect(lines == ["* SEARCH " + " ".join(str(i) for i in range(1, n + 1))], "SEARCH RECENT", lines)
    other = connect(args)
    _, lines = cmd(other, "SELECT INBOX")
    expect("* 0 RECENT" in lines, "a second SELECT: 0 RECENT, the first took them", lines)
    _, lines = cmd(other, "STATUS Sent (RECENT)")
    # Two sessions have INBOX selected; a third appends.
    third = connect(args)
    append(third, "INBOX", plain("recent"))
    third.logout()
    seen = []
    for s in (m, other):
        _, lines = cmd(s, "NOOP")
        _, f = cmd(s, f"FETCH {n + 1} FLAGS")
        seen.append((f"* {n + 1} EXISTS" in lines, [l for l in lines if l.endswith(" RECENT")],
                     "\\Recent" in " ".join(f)))
    expect(seen == [(True, [f"* {n + 1} RECENT"], True), (True, ["* 0 RECENT"], False)] or
           seen == [(True, [f"* {n} RECENT"], False), (True, ["* 1 RECENT"], True)],
           "a new message is \\Recent in exactly one of two sessions (RFC 3501 §2.3.2)", seen)
    other.logout()
    must(m, "UNSELECT", "UNSELECT")


def check_subscribe(m):
    _, lines = cmd(m, 'LSUB "" *')
    for name in ("Sent", "Drafts", "Trash", "Junk", "Archive"):
        expect(f'* LSUB () "/" {name}' in lines, f"{name} subscribed at account creation", lines)
    must(m, "CREATE sub1", "CREATE sub1")
    _, lines = cmd(m, 'LSUB "" sub1')
    expect(lines == [], "CREATE subscribes nothing", lines)
    must(m, "SUBSCRIBE ghost", "SUBSCRIBE a name that does not exist (RFC 3501 §6.3.6)")
    _, lines = cmd(m, 'LSUB "" ghost')
    expect(lines == ['* LSUB (\\Noselect) "/" ghost'], "LSUB shows it", lines)
    _, lines = cmd(m, 'LIST (SUBSCRIBED) "" ghost')
    expect(len(lines) == 1 and "\\NonExistent" in lines[0] and "\\Subscribed" in lines[0],
           "LIST (SUBSCRIBED): \\Subscribed \\NonExistent (RFC 5258)", lines)
    _, lines = cmd(m, 'LIST "" ghost')
    expect(lines == [], "plain LIST does not show a subscription without a mailbox", lines)
    must(m, "SUBSCRIBE sub1", "SUBSCRIBE sub1")
    must(m, "DELETE sub1", "DELETE sub1")
    _, lines = cmd(m, 'LSUB "" sub1')
    expect(lines == ['* LSUB (\\Noselect) "/" sub1'], "DELETE unsubscribes nothing", lines)


def check_flags(args, m):
    must(m, "CREATE kw", "CREATE kw")
    append(m, "kw", plain("kw"))
    _, lines = cmd(m, "SELECT kw")
    other = connect(args)
    cmd(other, "SELECT kw")
    _, lines = cmd(m, "STORE 1 +FLAGS ($Hello)")
    i = next((k for k, l in enumerate(lines) if l.startswith("* FLAGS")), None)
    j = next((k for k, l in enumerate(lines) if " FETCH " in l), None)
    expect(i is not None and j is not None and i < j and "$Hello" in lines[i],
           "STORE of a new keyword: FLAGS lists it before the FETCH", lines)
    expect(any("PERMANENTFLAGS" in l and "$Hello" in l and "\\*" in l for l in lines),
           "and PERMANENTFLAGS with it", lines)
    _, lines = cmd(other, "NOOP")
    expect(any(l.startswith("* FLAGS") and "$Hello" in l for l in lines),
           "another session is told the new FLAGS too", lines)
    _, lines = cmd(m, "STORE 1 +FLAGS ($Hello)")
    expect(not any(l.startswith("* FLAGS") for l in lines), "a known keyword: no FLAGS again", lines)
    other.logout()
    must(m, "UNSELECT", "UNSELECT")


def check_context(m):
    must(m, "CREATE ctx", "CREATE ctx")
    for i in range(5):
        append(m, "ctx", plain(f"c{i}", frm=f"u{5 - i}@test.local"))
    must(m, "SELECT ctx", "SELECT ctx")
    _, lines = cmd(m, "SORT RETURN (MIN MAX COUNT ALL) (FROM) US-ASCII ALL")
    expect(lines and lines[0].endswith("MIN 5 MAX 1 COUNT 5 ALL 5,4,3,2,1"), "ESORT: MIN, MAX, COUNT, ALL in sort order", lines)
    _, lines = cmd(m, "SEARCH RETURN (PARTIAL 2:3) ALL")
    expect(lines and lines[0].endswith("PARTIAL (2:3 2:3)"), "SEARCH RETURN (PARTIAL 2:3)", lines)
    _, lines = cmd(m, "SEARCH RETURN (PARTIAL 6:9) ALL")
    expect(lines and lines[0].endswith("PARTIAL (6:9 NIL)"), "PARTIAL beyond the result: NIL", lines)
    _, lines = cmd(m, "SORT RETURN (PARTIAL 1:2) (FROM) US-ASCII ALL")
    expect(lines and lines[0].endswith("PARTIAL (1:2 5,4)"), "SORT RETURN (PARTIAL 1:2)", lines)
    st, _ = cmd(m, "SEARCH RETURN (PARTIAL 1:*) ALL")
    expect(st.startswith("BAD"), "PARTIAL with * is BAD (RFC 5267 §4.4)", st)
    tag = m._new_tag().decode()
    m.send(f"{tag} UID SEARCH RETURN (UPDATE COUNT) SEEN\r\n".encode())
    st, lines = read_tagged(m, tag)
    expect(st.startswith("OK") and lines == [f'* ESEARCH (TAG "{tag}") UID COUNT 0'], "SEARCH RETURN (UPDATE)", lines)
    _, lines = cmd(m, "STORE 2,4 +FLAGS (\\Seen)")
    expect(f'* ESEARCH (TAG "{tag}") UID ADDTO (0 2,4)' in lines, "STORE: ADDTO for the messages now matching", lines)
    must(m, "STORE 4 +FLAGS.SILENT (\\Deleted)", "STORE \\Deleted")
    _, lines = cmd(m, "EXPUNGE")
    expect(lines[:2] == [f'* ESEARCH (TAG "{tag}") UID REMOVEFROM (0 4)', "* 4 EXPUNGE"],
           "EXPUNGE: REMOVEFROM before the EXPUNGE", lines)
    must(m, f'CANCELUPDATE "{tag}"', "CANCELUPDATE")
    _, lines = cmd(m, "STORE 1 +FLAGS (\\Seen)")
    expect(not any("ESEARCH" in l for l in lines), "no updates after CANCELUPDATE", lines)
    tag = m._new_tag().decode()
    m.send(f"{tag} SORT RETURN (UPDATE ALL) (FROM) US-ASCII UNSEEN\r\n".encode())
    st, lines = read_tagged(m, tag)
    expect(st.startswith("OK") and lines and lines[0].endswith("ALL 4,3"), "SORT RETURN (UPDATE ALL)", lines)
    lines = append(m, "ctx", plain("c9", frm="u0@test.local"))
    expect(f'* ESEARCH (TAG "{tag}") ADDTO (1 5)' in lines, "a new message: ADDTO at its sorted position", lines)
    must(m, "UNSELECT", "UNSELECT")


def check_catenate(m):
    must(m, "CREATE cat", "CREATE cat")
    src = plain("catenated", body="original body\r\n")
    append(m, "cat", src)
    _, lines = cmd(m, "STATUS cat (UIDVALIDITY)")
    uv = re.search(r"UIDVALIDITY (\d+)", lines[0]).group(1)
    text = b"\r\nadded\r\n"
    st, _ = cmd(m, f'APPEND cat CATENATE (URL "/cat;UIDVALIDITY={uv}/;UID=1/;SECTION=HEADER" TEXT {{{len(text)}+}}', text + b")")
    expect(st.startswith("OK [APPENDUID"), "APPEND CATENATE (URL … TEXT …)", st)
    must(m, "EXAMINE cat", "EXAMINE cat")
    tag = m._new_tag().decode()
    m.send(f"{tag} FETCH 2 BODY.PEEK[]\r\n".encode())
    head = m.readline()
    n = re.search(rb"\{(\d+)\}\r\n$", head)
    got = m.read(int(n.group(1))) if n else b""
    m.readline()
    read_tagged(m, tag)
    expect(got == src.split(b"\r\n\r\n")[0] + b"\r\n\r\n" + text, "the catenated message", got)
    st, _ = cmd(m, 'APPEND cat CATENATE (URL "/cat;UIDVALIDITY=1/;UID=1")')
    expect(st.startswith("NO [BADURL"), "a URL with another UIDVALIDITY: NO [BADURL]", st)
    st, _ = cmd(m, 'APPEND nowhere CATENATE (URL "/cat/;UID=1")')
    expect(st.startswith("NO [TRYCREATE]"), "CATENATE into a missing mailbox: TRYCREATE", st)
    must(m, "UNSELECT", "UNSELECT")


def check_objectid(m):
    idre = r"\(([A-Za-z0-9_-]{1,255})\)"

    def create(name):
        st, _ = cmd(m, f"CREATE {name}")
        got = re.search(r"\[MAILBOXID " + idre + r"\]", st)
        expect(st.startswith("OK") and got, f"CREATE {name} answers MAILBOXID (RFC 8474 §4.1)", st)
        return got.group(1) if got else None

    def status_id(name):
        st, lines = cmd(m, f"STATUS {name} (MAILBOXID)")
        got = [re.search(r"MAILBOXID " + idre, l) for l in lines]
        got = [g.group(1) for g in got if g]
        expect(st.startswith("OK") and len(got) == 1, f"STATUS {name} (MAILBOXID) (§4.4)", (st, lines))
        return got[0] if got else None

    first = create("oid1")
    must(m, "RENAME oid1 oid2", "RENAME oid1 oid2")
    expect(status_id("oid2") == first, "RENAME keeps the MAILBOXID (§4.2)", (first, status_id("oid2")))
    lines = must(m, "SELECT oid2", "SELECT oid2")
    expect(any(f"[MAILBOXID ({first})]" in l for l in lines), "SELECT reports the MAILBOXID (§4.3)", lines)
    must(m, "UNSELECT", "UNSELECT")
    # An ID is never handed out again: not for the same name created
    # again, not after the newest mailbox is deleted.
    newest = create("oid-newest")
    must(m, "DELETE oid-newest", "DELETE oid-newest")
    later = create("oid-later")
    expect(later not in (first, newest), "a new mailbox after deleting the newest gets a new MAILBOXID", (first, newest, later))
    st, lines = cmd(m, 'LIST "" oid-later RETURN (STATUS (MAILBOXID))')
    expect(any(f"MAILBOXID ({later})" in l for l in lines), "LIST-STATUS with MAILBOXID", lines)

    append(m, "oid2", plain("objectid one"))
    append(m, "oid2", plain("objectid two"))
    must(m, "SELECT oid2", "SELECT oid2")
    st, lines = cmd(m, "FETCH 1:2 (EMAILID THREADID)")
    ids = [re.search(r"EMAILID " + idre, l) for l in lines]
    ids = [g.group(1) for g in ids if g]
    expect(st.startswith("OK") and len(ids) == 2 and ids[0] != ids[1], "FETCH EMAILID: one per message (§5.1)", lines)
    expect(sum("THREADID NIL" in l for l in lines) == 2, "FETCH THREADID NIL: no threads kept (§5.2)", lines)
    create("oid3")
    must(m, "COPY 1 oid3", "COPY 1 oid3")
    must(m, "MOVE 2 oid3", "MOVE 2 oid3")
    must(m, "SELECT oid3", "SELECT oid3")
    st, lines = cmd(m, "FETCH 1:2 (EMAILID)")
    moved = [re.search(r"EMAILID " + idre, l) for l in lines]
    moved = [g.group(1) for g in moved if g]
    expect(moved == ids, "COPY and MOVE keep the EMAILID (§5.1)", (ids, lines))
    if ids:
        st, lines = cmd(m, f"UID SEARCH EMAILID {ids[1]}")
        expect(st.startswith("OK") and len([l for l in lines if l.startswith("* SEARCH ")]) == 1
               and len(lines[0].split()) == 3, "SEARCH EMAILID finds the moved message (§6)", lines)
    st, lines = cmd(m, "SEARCH THREADID T1")
    expect(st.startswith("OK") and lines == ["* SEARCH"], "SEARCH THREADID matches nothing", lines)
    st, _ = cmd(m, "SEARCH EMAILID bad!id")
    expect(st.startswith("BAD"), "SEARCH EMAILID with an invalid objectid is BAD (§7)", st)
    must(m, "UNSELECT", "UNSELECT")


def read_until(m, pred, timeout=5.0):
    """Reads untagged lines without a command until pred(line) holds
    (or nothing comes for timeout seconds)."""
    lines = []
    m.sock.settimeout(timeout)
    try:
        while True:
            line = m.readline().decode("utf-8", "replace").rstrip("\r\n")
            lines.append(line)
            if pred(line):
                return lines
    except (socket.timeout, TimeoutError):
        return lines
    finally:
        m.sock.settimeout(30)


def check_notify(args, m):
    must(m, "CREATE watched", "CREATE watched")
    append(m, "watched", plain("w1"))
    _, lines = cmd(m, "NOTIFY SET STATUS (MAILBOXES watched (MessageNew MessageExpunge)) (PERSONAL (MailboxName))")
    expect(any(l.startswith("* STATUS watched (MESSAGES 1 UIDNEXT 2 UIDVALIDITY ") for l in lines),
           "NOTIFY SET STATUS: the initial STATUS", lines)
    other = connect(args)
    append(other, "watched", plain("w2"))
    lines = read_until(m, lambda l: l.startswith("* STATUS watched"))
    expect(any(l.startswith("* STATUS watched (MESSAGES 2 UIDNEXT 3 ") for l in lines),
           "a delivery to a watched mailbox: STATUS with no command in progress", lines)
    must(other, "CREATE brandnew", "CREATE brandnew")
    lines = read_until(m, lambda l: "brandnew" in l)
    expect('* LIST () "/" brandnew' in lines, "MailboxName: LIST for a created mailbox", lines)
    must(other, "RENAME brandnew renamed", "RENAME brandnew renamed")
    lines = read_until(m, lambda l: "renamed" in l)
    expect('* LIST () "/" renamed ("OLDNAME" ("brandnew"))' in lines, "MailboxName: LIST with OLDNAME", lines)
    other.logout()
    st, _ = cmd(m, "NOTIFY SET (PERSONAL (AnnotationChange))")
    expect(st.startswith("NO [BADEVENT"), "an unsupported event: NO [BADEVENT]", st)
    st, _ = cmd(m, "NOTIFY SET (SELECTED (MessageNew))")
    expect(st.startswith("BAD"), "SELECTED MessageNew without MessageExpunge: BAD", st)
    must(m, "NOTIFY SET (SELECTED (MessageNew (UID FLAGS) MessageExpunge))", "NOTIFY SET SELECTED")
    must(m, "SELECT watched", "SELECT watched")
    other = connect(args)
    append(other, "watched", plain("w3"))
    lines = read_until(m, lambda l: " FETCH " in l)
    expect("* 3 EXISTS" in lines and any(re.match(r"\* 3 FETCH \(UID 3 FLAGS \(.*\)\)", l) for l in lines),
           "SELECTED: EXISTS and the MessageNew FETCH with no command in progress", lines)
    other.logout()
    must(m, "NOTIFY NONE", "NOTIFY NONE")


def main():
    global keep_going
    ap = argparse.ArgumentParser()
    ap.add_argument("--imap", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--recent", type=int, required=True)
    ap.add_argument("--keep-going", action="store_true")
    args = ap.parse_args()
    keep_going = args.keep_going
    m = connect(args)
    caps = m.capabilities
    for c in ("ESORT", "CONTEXT=SEARCH", "CONTEXT=SORT", "CATENATE", "NOTIFY", "OBJECTID"):
        expect(c in caps, f"CAPABILITY {c}", caps)
    checks = [
        lambda: check_recent(args, m, args.recent),
        lambda: check_atoms(m),
        lambda: check_binary(m),
        lambda: check_esearch_modseq(m),
        lambda: check_listext(m),
        lambda: check_lsub(m),
        lambda: check_subscribe(m),
        lambda: check_flags(args, m),
        lambda: check_context(m),
        lambda: check_catenate(m),
        lambda: check_notify(args, m),
        lambda: check_objectid(m),
    ]
    for c in checks:
        try:
            c()
        except SystemExit:
            raise
        except Exception as e:  # an older server may break a check's assumptions
            expect(False, f"check raised {type(e).__name__}", str(e))
            m = connect(args)
    m.logout()
    if failures:
        print(f"{failures} checks failed")
        return 1
    print("all imaptest regression checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
