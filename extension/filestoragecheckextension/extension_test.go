// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package filestoragecheckextension

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/extension/filestoragecheckextension/internal/metadata"
)

// queueFile is the name file_storage gives the otlp_grpc/gateway exporter's metrics queue.
const queueFile = "exporter_otlp_grpc_gateway_metrics"

// writeQueue writes a valid bbolt database like file_storage's, with enough data to span many
// pages.
func writeQueue(t *testing.T, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("default"))
		if err != nil {
			return err
		}
		for i := range 2000 {
			if err := b.Put(fmt.Appendf(nil, "%08d", i), []byte(strings.Repeat("x", 200))); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())
}

func start(t *testing.T, dir string) (*observer.ObservedLogs, error) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	set := extensiontest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	cfg := &Config{Directory: dir, Timeout: 200 * time.Millisecond}
	ext, err := NewFactory().Create(t.Context(), set, cfg)
	require.NoError(t, err)
	err = ext.Start(t.Context(), componenttest.NewNopHost())
	require.NoError(t, ext.Shutdown(t.Context()))
	return logs, err
}

func TestCorruptFilesAreMovedAside(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, path string){
		"garbage": func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("not a bbolt database\n", 1000)), 0o600))
		},
		"truncated": func(t *testing.T, path string) {
			info, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, info.Size()/2))
		},
		"garbage-over-pages": func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte(strings.Repeat("\xff", 16384)), 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, queueFile)
			writeQueue(t, path)
			damage(t, path)
			logs, err := start(t, dir)
			require.NoError(t, err)
			_, statErr := os.Stat(path)
			assert.ErrorIs(t, statErr, os.ErrNotExist, "the corrupt file is no longer where file_storage opens it")
			aside, _ := filepath.Glob(path + asideSuffix + "*")
			assert.Len(t, aside, 1, "the corrupt file is kept beside it")
			entries := logs.FilterMessageSnippet("corrupt and is moved aside").All()
			require.Len(t, entries, 1, "the move is logged")
			assert.Equal(t, path, entries[0].ContextMap()["file"])

			// file_storage now opens a fresh database there.
			db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
			require.NoError(t, err)
			require.NoError(t, db.Close())
		})
	}
}

func TestSoundFilesAreKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, queueFile)
	writeQueue(t, path)
	empty := filepath.Join(dir, "exporter_otlp_grpc_gateway_logs")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	other := filepath.Join(dir, "tempdb123456") // compaction's scratch file: not ours to judge
	require.NoError(t, os.WriteFile(other, []byte("scratch"), 0o600))
	logs, err := start(t, dir)
	require.NoError(t, err)
	assert.Zero(t, logs.Len(), "nothing to say")
	for _, p := range []string{path, empty, other} {
		assert.FileExists(t, p)
	}
}

func TestMissingDirectoryIsFine(t *testing.T) {
	_, err := start(t, filepath.Join(t.TempDir(), "not-yet"))
	assert.NoError(t, err, "file_storage creates the directory")
}

// A file that another process holds open is not corrupt: the start fails rather than moving a
// live queue aside.
func TestHeldFileFailsTheStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, queueFile)
	writeQueue(t, path)
	db, err := bbolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	defer db.Close()
	_, err = start(t, dir)
	assert.ErrorContains(t, err, "is held by another process")
	assert.FileExists(t, path)
}
