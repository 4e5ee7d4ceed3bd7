// Package password hashes and verifies account passwords with argon2id
// (RFC 9106) and stores them in the PHC string format:
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>
//
// with salt and hash in unpadded standard base64. The default parameters
// (19 MiB, two passes, one lane) suit a Raspberry Pi and follow the OWASP
// minimum for argon2id. Hashing is memory-hard by design, so at most
// runtime.NumCPU() hashes run at once: a login flood queues instead of
// exhausting memory.
package password

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// ErrMalformed is returned for a hash string that is not a usable argon2id
// PHC string.
var ErrMalformed = errors.New("password: malformed argon2id hash")

// Params are argon2id cost parameters.
type Params struct {
	Memory  uint32 // KiB
	Time    uint32 // passes
	Threads uint8  // lanes
	SaltLen uint32 // bytes
	KeyLen  uint32 // bytes
}

// DefaultParams are used by Hash.
var DefaultParams = Params{Memory: 19456, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}

// Limits on parameters accepted from a stored hash, so that a corrupt or
// hostile hash string cannot make Verify allocate gigabytes or spin.
const (
	maxMemory  = 1 << 20 // KiB (1 GiB)
	maxTime    = 64
	maxKeyLen  = 1024
	maxSaltLen = 1024
	minSaltLen = 8
	minKeyLen  = 16
)

// argonVersion is the only version golang.org/x/crypto/argon2 implements
// (0x13, RFC 9106 §3.1).
const argonVersion = argon2.Version

// sem bounds concurrent hash computations.
var sem = make(chan struct{}, max(1, runtime.NumCPU()))

func acquire(ctx context.Context) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("password: waiting to hash: %w", ctx.Err())
	}
}

func release() { <-sem }

// Hash hashes pw with DefaultParams and a random salt.
func Hash(pw string) (string, error) {
	return HashParams(context.Background(), pw, DefaultParams)
}

// HashParams hashes pw with the given parameters; it waits for a hashing
// slot until ctx is done.
func HashParams(ctx context.Context, pw string, p Params) (string, error) {
	if err := p.check(); err != nil {
		return "", err
	}
	salt := make([]byte, p.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password: reading salt: %w", err)
	}
	if err := acquire(ctx); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(pw), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
	release()
	return encode(p, salt, key), nil
}

// Verify reports whether pw matches hash. Hashes made with other
// parameters than DefaultParams verify too. err is non-nil only for a
// malformed hash.
func Verify(hash, pw string) (bool, error) {
	return VerifyContext(context.Background(), hash, pw)
}

// VerifyContext is Verify that gives up waiting for a hashing slot when
// ctx is done.
func VerifyContext(ctx context.Context, hash, pw string) (bool, error) {
	p, salt, want, err := decode(hash)
	if err != nil {
		return false, err
	}
	if err := acquire(ctx); err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(pw), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	release()
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// NeedsRehash reports whether hash was made with weaker parameters than
// DefaultParams (or is not an argon2id hash), so that a caller that has
// just verified the password can store a fresh hash.
func NeedsRehash(hash string) bool {
	p, _, _, err := decode(hash)
	if err != nil {
		return true
	}
	d := DefaultParams
	return p.Memory < d.Memory || p.Time < d.Time || p.KeyLen < d.KeyLen || p.SaltLen < d.SaltLen
}

func (p Params) check() error {
	switch {
	case p.Memory < 8*uint32(max(p.Threads, 1)) || p.Memory > maxMemory:
		return fmt.Errorf("password: memory %d KiB out of range: %w", p.Memory, ErrMalformed)
	case p.Time < 1 || p.Time > maxTime:
		return fmt.Errorf("password: time %d out of range: %w", p.Time, ErrMalformed)
	case p.Threads < 1:
		return fmt.Errorf("password: parallelism 0: %w", ErrMalformed)
	case p.SaltLen < minSaltLen || p.SaltLen > maxSaltLen:
		return fmt.Errorf("password: salt length %d out of range: %w", p.SaltLen, ErrMalformed)
	case p.KeyLen < minKeyLen || p.KeyLen > maxKeyLen:
		return fmt.Errorf("password: key length %d out of range: %w", p.KeyLen, ErrMalformed)
	}
	return nil
}

// encode writes the PHC string format.
func encode(p Params, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argonVersion, p.Memory, p.Time, p.Threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// decode parses a PHC string: $argon2id$v=19$m=..,t=..,p=..$salt$hash.
// Parameters may come in any order; padded base64 is tolerated.
func decode(s string) (Params, []byte, []byte, error) {
	var p Params
	f := strings.Split(s, "$")
	if len(f) != 6 || f[0] != "" || f[1] != "argon2id" {
		return p, nil, nil, ErrMalformed
	}
	v, ok := strings.CutPrefix(f[2], "v=")
	if !ok {
		return p, nil, nil, ErrMalformed
	}
	if n, err := strconv.Atoi(v); err != nil || n != argonVersion {
		return p, nil, nil, fmt.Errorf("password: argon2 version %q unsupported: %w", v, ErrMalformed)
	}
	seen := 0
	for _, kv := range strings.Split(f[3], ",") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return p, nil, nil, ErrMalformed
		}
		n, err := strconv.ParseUint(val, 10, 32)
		if err != nil {
			return p, nil, nil, fmt.Errorf("password: parameter %q: %w", kv, ErrMalformed)
		}
		switch k {
		case "m":
			p.Memory = uint32(n)
			seen |= 1
		case "t":
			p.Time = uint32(n)
			seen |= 2
		case "p":
			if n > 255 {
				return p, nil, nil, fmt.Errorf("password: parallelism %d: %w", n, ErrMalformed)
			}
			p.Threads = uint8(n)
			seen |= 4
		default:
			// Unknown parameters (keyid, data) are not supported.
			return p, nil, nil, fmt.Errorf("password: parameter %q unsupported: %w", k, ErrMalformed)
		}
	}
	if seen != 7 {
		return p, nil, nil, fmt.Errorf("password: missing m, t or p: %w", ErrMalformed)
	}
	salt, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(f[4], "="))
	if err != nil {
		return p, nil, nil, fmt.Errorf("password: salt: %w", ErrMalformed)
	}
	key, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(f[5], "="))
	if err != nil {
		return p, nil, nil, fmt.Errorf("password: hash: %w", ErrMalformed)
	}
	p.SaltLen, p.KeyLen = uint32(len(salt)), uint32(len(key))
	if err := p.check(); err != nil {
		return p, nil, nil, err
	}
	return p, salt, key, nil
}
