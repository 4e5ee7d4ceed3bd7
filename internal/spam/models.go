package spam

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"pimail/internal/message"
	"pimail/internal/store"
)

// BaseAccount names the shared base model in the training API.
const BaseAccount int64 = 0

// modelSet holds the base model and the account models that have been
// used, loaded from the store (store.SpamModels) and saved back to it.
type modelSet struct {
	cfg  Config
	mu   sync.Mutex
	all  map[int64]*loaded // BaseAccount is the base model
	last time.Time         // last reload check
}

type loaded struct {
	m       *Model
	version int64 // of the stored model when read or last saved; 0: none stored
	// shipped: the base model is the one pimail ships with (shipped.go),
	// because none was trained here.
	shipped bool
}

// storeTimeout bounds one read or write of a model.
const storeTimeout = 30 * time.Second

// maxSaveAttempts bounds how often save merges its changes into a model
// another writer saved meanwhile and tries again.
const maxSaveAttempts = 5

func newModelSet(cfg Config) (*modelSet, error) {
	s := &modelSet{cfg: cfg, all: map[int64]*loaded{}, last: time.Now()}
	if _, err := s.get(BaseAccount); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *modelSet) limit(id int64) int {
	if id == BaseAccount {
		return s.cfg.MaxTokens
	}
	return s.cfg.MaxAccountTokens
}

// get returns a model, loading it from the store on first use.
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

// load reads a model from the store; a model never stored is empty.
func (s *modelSet) load(id int64) (*loaded, error) {
	m := NewModel(s.limit(id))
	var version int64
	if s.cfg.Store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		data, v, err := s.cfg.Store.SpamModel(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("load spam model: %w", err)
		}
		version = v
		if data != nil {
			if m, err = readModel(data, s.limit(id)); err != nil {
				return nil, fmt.Errorf("load spam model of account %d: %w", id, err)
			}
		}
	}
	if id == BaseAccount && !s.cfg.NoShippedModel {
		if ns, nh := m.Counts(); ns == 0 && nh == 0 {
			shipped, err := shippedModel(s.limit(id))
			if err != nil {
				return nil, err
			}
			return &loaded{m: shipped, version: version, shipped: true}, nil
		}
	}
	if s.cfg.Store != nil {
		m.track()
	}
	return &loaded{m: m, version: version}, nil
}

// trainable returns the model to train for id. A base model trained here
// starts empty rather than from the shipped one: the admin's own mail
// then speaks alone, and the shipped model stays what it is (it is never
// saved).
func (s *modelSet) trainable(id int64) (*Model, error) {
	if _, err := s.get(id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.all[id]
	if l.shipped {
		m := NewModel(s.limit(id))
		if s.cfg.Store != nil {
			m.track()
		}
		l = &loaded{m: m, version: l.version}
		s.all[id] = l
	}
	return l.m, nil
}

func (s *modelSet) base() *Model {
	m, _ := s.get(BaseAccount) // loaded by newModelSet; never fails after
	return m
}

// account returns an account's own model; an account without a stored
// one gets an empty one (so it starts from the base model alone).
func (s *modelSet) account(id int64) (*Model, error) {
	if id == BaseAccount {
		return nil, nil
	}
	return s.get(id)
}

// maybeReload reads again the models that another process (pimail spam
// train) or node saved, at most once per ReloadInterval. Models with
// unsaved changes of their own are kept: their save merges.
func (s *modelSet) maybeReload() {
	if s.cfg.Store == nil || s.cfg.ReloadInterval < 0 {
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
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	for _, id := range ids {
		v, err := s.cfg.Store.SpamModelVersion(ctx, id)
		if err != nil {
			s.cfg.Logger.Warn("spam model: cannot check for a newer one", "account", id, "err", err)
			return
		}
		s.mu.Lock()
		cur := s.all[id]
		same := v == cur.version
		s.mu.Unlock()
		if same || cur.m.isDirty() {
			continue
		}
		l, err := s.load(id)
		if err != nil {
			s.cfg.Logger.Warn("spam model changed in the store but cannot be read; keeping the loaded one", "account", id, "err", err)
			continue
		}
		s.mu.Lock()
		s.all[id] = l
		s.mu.Unlock()
		s.cfg.Logger.Info("spam model reloaded", "account", id, "version", l.version)
	}
}

// save writes every model with unsaved changes, each with the junk
// ledger entries of its account in trained, in one transaction. A model
// that another writer saved meanwhile is read again, this set's changes
// are added to it, and it is saved again. saved lists the accounts whose
// model (and ledger entries) are stored.
func (s *modelSet) save(trained map[int64][]store.JunkTrained) (saved []int64, err error) {
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
		if !j.l.m.isDirty() && len(trained[j.id]) == 0 {
			continue
		}
		if s.cfg.Store == nil {
			saved = append(saved, j.id)
			continue
		}
		if err := s.saveOne(j.id, j.l, trained[j.id]); err != nil {
			errs = append(errs, err)
			continue
		}
		saved = append(saved, j.id)
	}
	return saved, errors.Join(errs...)
}

func (s *modelSet) saveOne(id int64, l *loaded, trained []store.JunkTrained) error {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	for range maxSaveAttempts {
		data, d := l.m.snapshot()
		s.mu.Lock()
		ifVersion := l.version
		s.mu.Unlock()
		v, err := s.cfg.Store.SaveSpamModel(ctx, id, data, ifVersion, trained)
		if err == nil {
			s.mu.Lock()
			l.version = v
			s.mu.Unlock()
			return nil
		}
		l.m.unsave(d)
		if !errors.Is(err, store.ErrModified) {
			return fmt.Errorf("save spam model of account %d: %w", id, err)
		}
		// Another writer came first: add this set's changes to its model.
		stored, version, err := s.cfg.Store.SpamModel(ctx, id)
		if err != nil {
			return fmt.Errorf("save spam model of account %d: %w", id, err)
		}
		base := NewModel(s.limit(id))
		if stored != nil {
			if base, err = readModel(stored, s.limit(id)); err != nil {
				return fmt.Errorf("save spam model of account %d: stored model: %w", id, err)
			}
		}
		if err := l.m.rebase(base); err != nil {
			return fmt.Errorf("save spam model of account %d: %w", id, err)
		}
		s.mu.Lock()
		l.version = version
		s.mu.Unlock()
	}
	return fmt.Errorf("save spam model of account %d: changed by others %d times meanwhile: %w", id, maxSaveAttempts, store.ErrModified)
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

// Save writes the models changed since they were loaded or last saved to
// the store (Config.Store). A model that another process or node saved
// meanwhile gets this filter's changes added to it. ErrModified (from
// internal/store) when that cannot be done: the changes since the load
// were too many to keep apart (more tokens than the model holds; train
// in smaller batches) or others kept saving first.
func (f *Filter) Save() error {
	_, err := f.models.save(nil)
	return err
}

// Model returns an account's model (BaseAccount: the base), for sizes and
// counts.
func (f *Filter) Model(accountID int64) (*Model, error) { return f.models.get(accountID) }
