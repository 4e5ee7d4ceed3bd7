package queue

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxPolicyBytes bounds a fetched MTA-STS policy (RFC 8461 §3.3 suggests
// 64 KiB).
const maxPolicyBytes = 64 << 10

// maxPolicyAge is the longest max_age honoured (RFC 8461 §3.2: 31557600).
const maxPolicyAge = 31557600 * time.Second

// stsPolicy is an MTA-STS policy (RFC 8461 §3.2).
type stsPolicy struct {
	id      string // from the TXT record
	mode    string // enforce, testing, none
	mx      []string
	maxAge  time.Duration
	fetched time.Time
}

// matches reports whether an MX host name fits one of the policy's mx
// patterns (RFC 8461 §4.1): equal, or "*.rest" matching exactly one
// left-most label.
func (p *stsPolicy) matches(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, pat := range p.mx {
		pat = strings.ToLower(strings.TrimSuffix(pat, "."))
		if rest, ok := strings.CutPrefix(pat, "*."); ok {
			if label, suffix, found := strings.Cut(host, "."); found && label != "" && suffix == rest {
				return true
			}
			continue
		}
		if host == pat {
			return true
		}
	}
	return false
}

func (p *stsPolicy) expired(now time.Time) bool { return now.After(p.fetched.Add(p.maxAge)) }

// stsCache keeps fetched policies in memory (RFC 8461 §5: a sender caches
// a policy for max_age and refreshes it when the TXT id changes).
type stsCache struct {
	mu       sync.Mutex
	policies map[string]*stsPolicy
}

func newSTSCache() *stsCache { return &stsCache{policies: map[string]*stsPolicy{}} }

func (c *stsCache) get(domain string) *stsPolicy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.policies[domain]
}

func (c *stsCache) put(domain string, p *stsPolicy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.policies[domain] = p
}

// mtaSTS returns the domain's policy, or nil when it has none (RFC 8461
// §3, §5.1): the TXT record _mta-sts.<domain> announces a policy and its
// id; the policy comes from https://mta-sts.<domain>/.well-known/mta-sts.txt.
// A failed lookup or fetch falls back to an unexpired cached policy.
func (q *Queue) mtaSTS(ctx context.Context, domain string) *stsPolicy {
	now := q.now()
	cached := q.sts.get(domain)
	if cached != nil && cached.expired(now) {
		cached = nil
	}
	id, found := q.stsRecord(ctx, domain)
	if !found {
		return cached
	}
	if cached != nil && cached.id == id {
		return cached
	}
	p, err := q.fetchPolicy(ctx, domain)
	if err != nil {
		q.log.Warn("MTA-STS policy fetch failed", "domain", domain, "err", err)
		return cached
	}
	p.id, p.fetched = id, now
	q.sts.put(domain, p)
	q.log.Info("MTA-STS policy fetched", "domain", domain, "mode", p.mode, "mx", p.mx, "max_age", p.maxAge)
	return p
}

// stsRecord looks up the policy id in "v=STSv1; id=..." (RFC 8461 §3.1).
func (q *Queue) stsRecord(ctx context.Context, domain string) (string, bool) {
	txts, _, err := q.dns.LookupTXT(ctx, "_mta-sts."+domain)
	if err != nil {
		return "", false
	}
	var ids []string
	for _, t := range txts {
		fields := strings.Split(t.Text, ";")
		if strings.TrimSpace(fields[0]) != "v=STSv1" {
			continue
		}
		for _, f := range fields[1:] {
			if k, v, ok := strings.Cut(strings.TrimSpace(f), "="); ok && k == "id" {
				ids = append(ids, strings.TrimSpace(v))
			}
		}
	}
	// §3.1: more than one record means no policy record.
	if len(ids) != 1 || ids[0] == "" {
		return "", false
	}
	return ids[0], true
}

// fetchPolicy gets and parses the policy over HTTPS (RFC 8461 §3.3): a
// valid certificate for mta-sts.<domain>, status 200, text/plain, no
// redirects.
func (q *Queue) fetchPolicy(ctx context.Context, domain string) (*stsPolicy, error) {
	url := "https://mta-sts." + domain + "/.well-known/mta-sts.txt"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("policy request: %w", err)
	}
	resp, err := q.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: HTTP status %d", url, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "text/plain") {
		return nil, fmt.Errorf("fetch %s: content type %q, want text/plain", url, ct)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if len(body) > maxPolicyBytes {
		return nil, fmt.Errorf("policy %s is larger than %d bytes", url, maxPolicyBytes)
	}
	return parsePolicy(string(body))
}

// CheckPolicy reports why text is not a policy senders accept (RFC 8461
// §3.2), read as this queue reads other domains' policies; nil when it is
// one. `pimail domain mta-sts` checks the policies it publishes with it.
func CheckPolicy(text string) error {
	_, err := parsePolicy(text)
	return err
}

// parsePolicy reads the key: value lines of RFC 8461 §3.2.
func parsePolicy(text string) (*stsPolicy, error) {
	p := &stsPolicy{}
	version := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "version":
			version = v
		case "mode":
			p.mode = v
		case "mx":
			p.mx = append(p.mx, v)
		case "max_age":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("policy: bad max_age %q", v)
			}
			p.maxAge = min(time.Duration(n)*time.Second, maxPolicyAge)
		}
	}
	if version != "STSv1" {
		return nil, fmt.Errorf("policy: version %q, want STSv1", version)
	}
	switch p.mode {
	case "enforce", "testing":
		if len(p.mx) == 0 {
			return nil, fmt.Errorf("policy: mode %s without mx", p.mode)
		}
	case "none":
	default:
		return nil, fmt.Errorf("policy: unknown mode %q", p.mode)
	}
	if p.maxAge == 0 {
		return nil, fmt.Errorf("policy: max_age missing")
	}
	return p, nil
}
