"""A SCRAM-SHA-256 client (RFC 5802, RFC 7677) in plain Python
(hashlib/hmac), for pimail's black-box tests of IMAP AUTHENTICATE and POP3
AUTH. Passwords are expected to be ASCII (no SASLprep needed, RFC 5802 §5.1).

    c = ScramClient(user, password)
    first = c.client_first()            # bytes, to send first
    final = c.client_final(server_first) # bytes, answer to the challenge
    c.verify(server_final)              # raises ScramError on a bad server
"""

import base64
import hashlib
import hmac
import os


class ScramError(Exception):
    pass


def _saslname(user):
    # RFC 5802 §5.1: "=" and "," in the user name are escaped.
    return user.replace("=", "=3D").replace(",", "=2C")


def _hmac(key, msg):
    return hmac.new(key, msg, hashlib.sha256).digest()


class ScramClient:
    def __init__(self, user, password, nonce=None):
        self.user = user
        self.password = password
        self.nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        self.gs2 = "n,,"
        self.bare = f"n={_saslname(user)},r={self.nonce}"
        self.server_signature = None

    def client_first(self):
        return (self.gs2 + self.bare).encode()

    def client_final(self, server_first):
        s1 = server_first.decode()
        attrs = dict(kv.split("=", 1) for kv in s1.split(","))
        if not attrs.get("r", "").startswith(self.nonce) or len(attrs["r"]) <= len(self.nonce):
            raise ScramError(f"server nonce does not extend ours: {s1!r}")
        salt = base64.b64decode(attrs["s"])
        iters = int(attrs["i"])
        if iters < 4096:  # RFC 7677 §4
            raise ScramError(f"iteration count {iters} below 4096")
        salted = hashlib.pbkdf2_hmac("sha256", self.password.encode(), salt, iters)
        client_key = _hmac(salted, b"Client Key")
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = "c=" + base64.b64encode(self.gs2.encode()).decode() + ",r=" + attrs["r"]
        auth_message = ",".join([self.bare, s1, without_proof]).encode()
        signature = _hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = _hmac(salted, b"Server Key")
        self.server_signature = _hmac(server_key, auth_message)
        return (without_proof + ",p=" + base64.b64encode(proof).decode()).encode()

    def verify(self, server_final):
        s2 = server_final.decode()
        if s2.startswith("e="):
            raise ScramError(f"server error {s2!r}")
        if not s2.startswith("v=") or base64.b64decode(s2[2:]) != self.server_signature:
            raise ScramError(f"server signature does not match: {s2!r}")

    def imap_authobject(self):
        """A callable for imaplib.IMAP4.authenticate: it is called with
        each decoded challenge and returns the decoded response."""
        steps = iter([
            lambda ch: self.client_first(),
            self.client_final,
            lambda ch: (self.verify(ch), b"")[1],  # empty answer to server-final
        ])

        def step(challenge):
            return next(steps)(challenge)

        return step
