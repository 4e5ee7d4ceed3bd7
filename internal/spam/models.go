package spam

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"pimail/internal/message"
)

// BaseAccount names the shared base model in the training API.
const BaseAccount int64 = 0

// modelSet holds the base model and the account models that have been
// used, and knows their files: DIR/base.model and DIR/account-<id>.model.
type modelSet struct {
	cfg  Config
	mu   sync.Mutex
	all  map[int64]*loaded // BaseAccount is the base model
	last time.Time         // last reload check
}

type loaded struct {
	m       *Model
	modTime time.Time // of the file when read; zero if there was none
	// shipped: the base model is the one pimail ships with (shipped.go),
	// because none was trained here.
	shipped bool
}

func newModelSet(cfg Config) (*modelSet, error) {
	s := &modelSet{cfg: cfg, all: map[int64]*loaded{}, last: time.Now()}
	if _, err := s.get(BaseAccount); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *modelSet) path(id int64) string {
	if s.cfg.Dir == "" {
		return ""
	}
	if id == BaseAccount {
		return filepath.Join(s.cfg.Dir, "base.model")
	}
	return filepath.Join(s.cfg.Dir, "account-"+strconv.FormatInt(id, 10)+".model")
}

func (s *modelSet) limit(id int64) int {
	if id == BaseAccount {
		return s.cfg.MaxTokens
	}
	return s.cfg.MaxAccountTokens
}

// get returns a model, loading it from its file on first use.
func (s *modelSet) get(id int64) (*Model, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.all[id]; ok {
		return l.m, nil
	}
	l, err := s.load(id)
	if err != nil {
		return nil, err
	}
	s.all[id] = l
	return l.m, nil
}

func (s *modelSet) load(id int64) (*loaded, error) {
	l := &loaded{m: NewModel(s.limit(id))}
	if p := s.path(id); p != "" {
		if fi, err := os.Stat(p); err == nil {
			l.modTime = fi.ModTime()
		}
		m, err := LoadModel(p, s.limit(id))
		if err != nil {
			return nil, err
		}
		l.m = m
	}
	if id == BaseAccount && !s.cfg.NoShippedModel {
		if ns, nh := l.m.Counts(); ns == 0 && nh == 0 {
			m, err := shippedModel(s.limit(id))
			if err != nil {
				return nil, err
			}
			l.m, l.shipped = m, true
		}
	}
	return l, nil
}

// trainable returns the model to train for id. A base model trained here
// starts empty rather than from the shipped one: the admin's own mail
// then speaks alone, and the shipped model stays what it is.
func (s *modelSet) trainable(id int64) (*Model, error) {
	if _, err := s.get(id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.all[id]
	if l.shipped {
		l = &loaded{m: NewModel(s.limit(id)), modTime: l.modTime}
		s.all[id] = l
	}
	return l.m, nil
}

func (s *modelSet) base() *Model {
	m, _ := s.get(BaseAccount) // loaded by newModelSet; never fails after
	return m
}

// account returns an account's own model; an account without a file gets
// an empty one (so it starts from the base model alone).
func (s *modelSet) account(id int64) (*Model, error) {
	if id == BaseAccount {
		return nil, nil
	}
	return s.get(id)
}

// maybeReload re-reads model files that another process (pimail spam
// train) replaced, at most once per ReloadInterval. Models with unsaved
// changes of their own are kept.
func (s *modelSet) maybeReload() {
	if s.cfg.Dir == "" || s.cfg.ReloadInterval < 0 {
		return
	}
	s.mu.Lock()
	if time.Since(s.last) < s.cfg.ReloadInterval {
		s.mu.Unlock()
		return
	}
	s.last = time.Now()
	ids := make([]int64, 0, len(s.all))
	for id := range s.all {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		fi, err := os.Stat(s.path(id))
		if err != nil {
			continue
		}
		s.mu.Lock()
		cur := s.all[id]
		s.mu.Unlock()
		cur.m.mu.RLock()
		dirty := cur.m.dirty
		cur.m.mu.RUnlock()
		if dirty || fi.ModTime().Equal(cur.modTime) {
			continue
		}
		l, err := s.load(id)
		if err != nil {
			s.cfg.Logger.Warn("spam model changed on disk but cannot be read; keeping the loaded one", "err", err)
			continue
		}
		s.mu.Lock()
		s.all[id] = l
		s.mu.Unlock()
		s.cfg.Logger.Info("spam model reloaded", "file", s.path(id))
	}
}

// save writes every model with unsaved changes.
func (s *modelSet) save() error {
	s.mu.Lock()
	type job struct {
		id int64
		l  *loaded
	}
	var jobs []job
	for id, l := range s.all {
		jobs = append(jobs, job{id, l})
	}
	s.mu.Unlock()
	var errs []error
	for _, j := range jobs {
		j.l.m.mu.RLock()
		dirty := j.l.m.dirty
		j.l.m.mu.RUnlock()
		p := s.path(j.id)
		if !dirty || p == "" {
			continue
		}
		if err := SaveModel(p, j.l.m); err != nil {
			errs = append(errs, err)
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			s.mu.Lock()
			j.l.modTime = fi.ModTime()
			s.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// TrainSpam counts raw as spam in an account's model (BaseAccount: the
// base model). Call Save to persist.
func (f *Filter) TrainSpam(accountID int64, raw []byte) error {
	return f.train(accountID, raw, true, 1)
}

// TrainHam counts raw as ham.
func (f *Filter) TrainHam(accountID int64, raw []byte) error {
	return f.train(accountID, raw, false, 1)
}

// Untrain removes a message trained earlier as spam (spam true) or ham,
// for instance before training it again with the other label when the
// user moves it out of Junk.
func (f *Filter) Untrain(accountID int64, raw []byte, spam bool) error {
	return f.train(accountID, raw, spam, -1)
}

func (f *Filter) train(accountID int64, raw []byte, spam bool, delta int) error {
	m, err := f.models.trainable(accountID)
	if err != nil {
		return fmt.Errorf("spam train: %w", err)
	}
	a := analyze(raw, message.Parse(raw))
	t := readTokens(a)
	defer putTokenSet(t)
	rc := &ruleCtx{a: a, in: &Input{}, now: receivedTime(a)}
	if rc.now.IsZero() {
		rc.now = time.Now()
	}
	ruleTokens(t, rc)
	m.learn(t.hashes, spam, delta)
	return nil
}

// Save writes the models changed since they were loaded or last saved.
func (f *Filter) Save() error { return f.models.save() }

// Model returns an account's model (BaseAccount: the base), for sizes and
// counts.
func (f *Filter) Model(accountID int64) (*Model, error) { return f.models.get(accountID) }
