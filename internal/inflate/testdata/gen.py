# Generates raw DEFLATE streams (RFC 1951) the way zlib-based IMAP clients
# flush them (RFC 4978). Output: records of
#   u32be len(plain) | plain | u32be len(comp) | comp
# where comp is what zlib emitted for plain followed by the given flush; a
# last record with empty plain carries the Z_FINISH bits.
# Usage: gen.py partial|sync|full|mixed LEVEL SEED SEGMENTS
import struct
import sys
import zlib

mode, level, seed, nseg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
modes = {"partial": zlib.Z_PARTIAL_FLUSH, "sync": zlib.Z_SYNC_FLUSH, "full": zlib.Z_FULL_FLUSH}
mixed = [zlib.Z_PARTIAL_FLUSH, zlib.Z_SYNC_FLUSH, zlib.Z_FULL_FLUSH]
words = (b"the quick brown fox jumps over lazy dog INBOX FETCH UID BODY.PEEK[] "
         b"FLAGS \\Seen NOOP IDLE DONE SELECT mail from to subject").split()
x = seed


def rnd(n):
    global x
    x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return (x >> 8) % n


c = zlib.compressobj(level, zlib.DEFLATED, -15, 9)
out = sys.stdout.buffer
for i in range(nseg):
    flush = modes[mode] if mode in modes else mixed[rnd(3)]
    k = rnd(5)
    if k == 0:
        plain = b"%d NOOP\r\n" % i
    elif k == 1:
        plain = b" ".join(words[rnd(len(words))] for _ in range(rnd(40) + 1)) + b"\r\n"
    elif k == 2:
        plain = bytes(rnd(256) for _ in range(rnd(300)))
    elif k == 3:
        plain = b"".join(b"%d UID FETCH %d:* (FLAGS %s)\r\n" % (i, rnd(100000), words[rnd(len(words))])
                         for _ in range(rnd(50) + 1))
    else:
        plain = b"a" * rnd(1000)
    comp = c.compress(plain) + c.flush(flush)
    out.write(struct.pack(">I", len(plain)) + plain + struct.pack(">I", len(comp)) + comp)
comp = c.flush(zlib.Z_FINISH)
out.write(struct.pack(">I", 0) + struct.pack(">I", len(comp)) + comp)
