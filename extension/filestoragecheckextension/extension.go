// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package filestoragecheckextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/filestoragecheckextension"

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
)

// file_storage names each component's database <kind>_<type>_<name>...: only such files are
// checked; anything else in the directory (compaction's temporary files, files set aside) is
// left alone.
var databasePrefixes = []string{"exporter_", "receiver_", "processor_", "extension_", "connector_"}

// asideSuffix marks a file moved aside; a timestamp follows it.
const asideSuffix = ".corrupt-"

type checker struct {
	cfg    *Config
	logger *zap.Logger
}

// Start checks every database file and moves each corrupt one aside. It fails only when the
// directory cannot be read, a file is held by another process, or a corrupt file cannot be
// moved.
func (c *checker) Start(context.Context, component.Host) error {
	entries, err := os.ReadDir(c.cfg.Directory)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // file_storage creates it (create_directory); nothing to check yet
	}
	if err != nil {
		return fmt.Errorf("file_storage_check: %w", err)
	}
	for _, entry := range entries {
		if !entry.Type().IsRegular() || !isDatabase(entry.Name()) {
			continue
		}
		path := filepath.Join(c.cfg.Directory, entry.Name())
		checkErr := checkDatabase(path, c.cfg.Timeout)
		if checkErr == nil {
			continue
		}
		if errors.Is(checkErr, berrors.ErrTimeout) {
			return fmt.Errorf("file_storage_check: %s is held by another process (two collectors on one queue directory?): %w", path, checkErr)
		}
		aside := path + asideSuffix + time.Now().UTC().Format("20060102T150405.000Z")
		if err := os.Rename(path, aside); err != nil {
			return fmt.Errorf("file_storage_check: %s is corrupt (%w) and cannot be moved aside: %w", path, checkErr, err)
		}
		c.logger.Error("A persistent queue file was corrupt and is moved aside: its queue starts empty, and what it held is not delivered",
			zap.String("file", path), zap.String("moved_to", aside), zap.Error(checkErr))
	}
	return nil
}

func (*checker) Shutdown(context.Context) error { return nil }

func isDatabase(name string) bool {
	if strings.Contains(name, asideSuffix) || strings.HasSuffix(name, ".backup") {
		return false
	}
	for _, p := range databasePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// checkDatabase opens path read-only and reads every page: first in this goroutine (the
// freelist, then every bucket and key), then with bbolt's own consistency check. An empty file
// is fine: bbolt initializes it. A page number that points outside the file makes bbolt read
// outside its memory map: with panic-on-fault set here that is a panic like bbolt's own on other
// damage, and both are taken for corruption. bbolt's check runs in a goroutine of its own, where
// a fault would kill the process: it only runs once this goroutine has touched every page it
// reads.
func checkDatabase(path string, timeout time.Duration) (err error) {
	if info, statErr := os.Stat(path); statErr != nil {
		return statErr
	} else if info.Size() == 0 {
		return nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bbolt panicked reading it: %v", r)
		}
	}()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: timeout, ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bbolt.Tx) error {
		if err := tx.ForEach(func(_ []byte, b *bbolt.Bucket) error { return walk(b) }); err != nil {
			return err
		}
		var errs []error
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		return errors.Join(errs...)
	})
}

// walk reads every key and value of b and of the buckets nested in it.
func walk(b *bbolt.Bucket) error {
	return b.ForEach(func(k, _ []byte) error {
		if nested := b.Bucket(k); nested != nil {
			return walk(nested)
		}
		return nil
	})
}
