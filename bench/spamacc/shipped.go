package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"pimail/bench/spamsplit"
	"pimail/internal/spam"
	"pimail/internal/store"
)

// writeShippedModel trains a base model on every message of the
// SpamAssassin public corpus part (the part whose licence allows
// redistribution; see internal/spam/shipped.go) and writes it in the
// shipped form.
func writeShippedModel(corpus, out string) error {
	var all []spamsplit.Sample
	for _, name := range []string{"train.txt", "test.txt"} {
		s, err := spamsplit.ReadList(corpus, name)
		if err != nil {
			return err
		}
		all = append(all, s...)
	}
	f, err := spam.New(spam.Config{ReloadInterval: -1, NoShippedModel: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	n := 0
	for _, s := range all {
		if spamsplit.Source(s) != "sa-" {
			continue
		}
		n++
		if err := trainOne(f, s); err != nil {
			return err
		}
	}
	m, err := f.Model(spam.BaseAccount)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := spam.WriteShipped(&buf, m, spam.ShippedMinCount); err != nil {
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	ns, nh := m.Counts()
	fmt.Printf("shipped model: %d messages (%d spam, %d ham), %d tokens before leaving out those seen fewer than %d times, %s: %d bytes\n",
		n, ns, nh, m.Size(), spam.ShippedMinCount, out, buf.Len())
	return nil
}

func trainOne(f *spam.Filter, s spamsplit.Sample) error {
	if s.Spam {
		return f.TrainSpam(spam.BaseAccount, s.Raw)
	}
	return f.TrainHam(spam.BaseAccount, s.Raw)
}

// trainAccount trains account 1's own model (-account).
func trainAccount(f *spam.Filter, s spamsplit.Sample) error {
	if s.Spam {
		return f.TrainSpam(1, s.Raw)
	}
	return f.TrainHam(1, s.Raw)
}

// trained reports whether -train-sources lets a message be trained.
func trained(s spamsplit.Sample) bool {
	if trainSources == "" {
		return true
	}
	for _, src := range strings.Split(trainSources, ",") {
		if strings.HasPrefix(s.Name(), strings.TrimSpace(src)) {
			return true
		}
	}
	return false
}

// compacted returns a filter whose base model is f's in the shipped form
// (-min-count), read back from the model format as pimail reads it.
func compacted(f *spam.Filter, cfg spam.Config) (*spam.Filter, error) {
	m, err := f.Model(spam.BaseAccount)
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	if err := spam.WriteShipped(&gz, m, minCount); err != nil {
		return nil, err
	}
	size := gz.Len()
	zr, err := gzip.NewReader(&gz)
	if err != nil {
		return nil, err
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	cfg.Store = baseOnly(plain)
	cfg.ReloadInterval = -1
	c, err := spam.New(cfg)
	if err != nil {
		return nil, err
	}
	cm, _ := c.Model(spam.BaseAccount)
	fmt.Printf("model in the shipped form (tokens in %d+ messages): %d of %d tokens, %d bytes gzipped\n", minCount, cm.Size(), m.Size(), size)
	return c, nil
}

// baseOnly is a store.SpamModels holding one base model, read-only.
type baseOnly []byte

func (b baseOnly) SpamModel(_ context.Context, id int64) ([]byte, int64, error) {
	if id != spam.BaseAccount {
		return nil, 0, nil
	}
	return b, 1, nil
}

func (b baseOnly) SpamModelVersion(_ context.Context, id int64) (int64, error) {
	if id != spam.BaseAccount {
		return 0, nil
	}
	return 1, nil
}

func (baseOnly) SaveSpamModel(context.Context, int64, []byte, int64, []store.JunkTrained) (int64, error) {
	return 0, errors.New("spamacc: the compacted model is read-only")
}

func (baseOnly) JunkTrained(context.Context, int64, int64) (bool, bool, error) {
	return false, false, nil
}
