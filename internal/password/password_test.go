package password

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
)

// fast are cheap parameters so the tests stay quick.
var fast = Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

func TestHashVerify(t *testing.T) {
	h, err := Hash("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash = %q", h)
	}
	if ok, err := Verify(h, "correct horse"); !ok || err != nil {
		t.Errorf("Verify(right) = %v, %v", ok, err)
	}
	for _, wrong := range []string{"", "correct horsE", "correct horse "} {
		if ok, err := Verify(h, wrong); ok || err != nil {
			t.Errorf("Verify(%q) = %v, %v", wrong, ok, err)
		}
	}
	h2, _ := Hash("correct horse")
	if h2 == h {
		t.Error("two hashes of one password are equal: salt not random")
	}
	if NeedsRehash(h) {
		t.Error("default hash needs rehash")
	}
}

func TestOtherParams(t *testing.T) {
	for _, p := range []Params{
		fast,
		{Memory: 256, Time: 3, Threads: 2, SaltLen: 8, KeyLen: 16},
		{Memory: 1024, Time: 1, Threads: 4, SaltLen: 32, KeyLen: 64},
	} {
		h, err := HashParams(context.Background(), "pw", p)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := Verify(h, "pw"); !ok || err != nil {
			t.Errorf("%+v: Verify = %v, %v", p, ok, err)
		}
		if ok, _ := Verify(h, "pW"); ok {
			t.Errorf("%+v: wrong password accepted", p)
		}
		if !NeedsRehash(h) {
			t.Errorf("%+v: weak hash does not need rehash", p)
		}
	}
}

// TestEncoding checks the PHC string against argon2.IDKey computed
// independently, including parameters in another order and padding.
func TestEncoding(t *testing.T) {
	salt := []byte("0123456789abcdef")
	key := argon2.IDKey([]byte("secret"), salt, 2, 128, 2, 32)
	b64 := base64.RawStdEncoding.EncodeToString
	forms := []string{
		fmt.Sprintf("$argon2id$v=19$m=128,t=2,p=2$%s$%s", b64(salt), b64(key)),
		fmt.Sprintf("$argon2id$v=19$p=2,t=2,m=128$%s$%s", b64(salt), b64(key)),
		fmt.Sprintf("$argon2id$v=19$m=128,t=2,p=2$%s$%s", base64.StdEncoding.EncodeToString(salt), base64.StdEncoding.EncodeToString(key)),
	}
	for _, h := range forms {
		if ok, err := Verify(h, "secret"); !ok || err != nil {
			t.Errorf("Verify(%q) = %v, %v", h, ok, err)
		}
	}
	if got := encode(Params{Memory: 128, Time: 2, Threads: 2}, salt, key); got != forms[0] {
		t.Errorf("encode = %q, want %q", got, forms[0])
	}
}

func TestMalformed(t *testing.T) {
	good, _ := HashParams(context.Background(), "x", fast)
	f := strings.Split(good, "$")
	bad := []string{
		"",
		"plaintext",
		"$argon2i$v=19$m=64,t=1,p=1$" + f[4] + "$" + f[5],
		"$argon2id$v=16$m=64,t=1,p=1$" + f[4] + "$" + f[5],
		"$argon2id$m=64,t=1,p=1$" + f[4] + "$" + f[5],
		"$argon2id$v=19$m=64,t=1$" + f[4] + "$" + f[5],
		"$argon2id$v=19$m=99999999,t=1,p=1$" + f[4] + "$" + f[5],
		"$argon2id$v=19$m=64,t=1000000,p=1$" + f[4] + "$" + f[5],
		"$argon2id$v=19$m=64,t=1,p=0$" + f[4] + "$" + f[5],
		"$argon2id$v=19$m=64,t=1,p=1$!!$" + f[5],
		"$argon2id$v=19$m=64,t=1,p=1$" + f[4] + "$",
		"$argon2id$v=19$m=64,t=1,p=1,keyid=x$" + f[4] + "$" + f[5],
	}
	for _, h := range bad {
		ok, err := Verify(h, "x")
		if ok || !errors.Is(err, ErrMalformed) {
			t.Errorf("Verify(%q) = %v, %v; want ErrMalformed", h, ok, err)
		}
	}
}

func TestConcurrencyBounded(t *testing.T) {
	// Fill every slot: a verification must then wait, and give up with
	// the context.
	for i := 0; i < cap(sem); i++ {
		sem <- struct{}{}
	}
	h := "$argon2id$v=19$m=64,t=1,p=1$MDEyMzQ1Njc4OWFiY2RlZg$MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := VerifyContext(ctx, h, "x")
	cancel()
	for i := 0; i < cap(sem); i++ {
		<-sem
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	// Many concurrent verifications all finish correctly.
	good, _ := HashParams(context.Background(), "pw", fast)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, err := Verify(good, "pw"); !ok || err != nil {
				errs <- fmt.Errorf("verify = %v, %v", ok, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
