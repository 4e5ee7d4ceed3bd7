package password

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"fmt"

	"github.com/xdg-go/stringprep"

	"pimail/internal/store"
)

// SCRAMIterations is the iteration count of new SCRAM-SHA-256 keys. RFC
// 7677 §4 asks for at least 4096; more makes every SCRAM login costlier
// for the client, which on a phone is noticeable.
const SCRAMIterations = 4096

// scramSaltLen is the salt size in bytes.
const scramSaltLen = 16

// SCRAMKeys derives the SCRAM-SHA-256 credentials a server keeps for a
// password (RFC 5802 §3, RFC 7677), with a fresh random salt:
//
//	SaltedPassword = Hi(SASLprep(password), salt, i)   (PBKDF2-HMAC-SHA-256)
//	StoredKey      = SHA-256(HMAC(SaltedPassword, "Client Key"))
//	ServerKey      = HMAC(SaltedPassword, "Server Key")
//
// Set and AddAccount store them beside the password hash.
func SCRAMKeys(pw string) (store.SCRAMCredentials, error) {
	salt := make([]byte, scramSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return store.SCRAMCredentials{}, fmt.Errorf("password: scram salt: %w", err)
	}
	return SCRAMKeysWith(pw, salt, SCRAMIterations)
}

// SCRAMKeysWith derives SCRAM-SHA-256 credentials with the given salt and
// iteration count.
func SCRAMKeysWith(pw string, salt []byte, iterations int) (store.SCRAMCredentials, error) {
	// RFC 5802 §5.1: the password is normalised with SASLprep (RFC 4013).
	prepped, err := stringprep.SASLprep.Prepare(pw)
	if err != nil {
		return store.SCRAMCredentials{}, fmt.Errorf("password: SASLprep: %w", err)
	}
	salted, err := pbkdf2.Key(sha256.New, prepped, salt, iterations, sha256.Size)
	if err != nil {
		return store.SCRAMCredentials{}, fmt.Errorf("password: scram key derivation: %w", err)
	}
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	return store.SCRAMCredentials{
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  stored[:],
		ServerKey:  hmacSHA256(salted, "Server Key"),
	}, nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
