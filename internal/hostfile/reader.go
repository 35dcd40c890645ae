// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package hostfile reads the small files a kernel generates (cgroup control files, /proc/<pid>/
// files) into buffers reused from one read to the next. A node of 500 containers has thousands
// of them read every collection; os.ReadFile would allocate each path twice (filepath.Join,
// then the copy os.Open makes for the system call), a File and the contents: most of what a
// collection allocated besides its metrics.
package hostfile // import "github.com/otelcol-gpu/otelcol-gpu/internal/hostfile"

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Reader reads one file at a time. What a read returns is valid until the next read; a Reader
// is not safe for concurrent use (a receiver's collections run one after the other).
type Reader struct {
	// path holds the NUL-terminated path of the file being read, for the system call itself.
	path []byte
	buf  []byte
}

// ReadFile returns the contents of the file whose path is parts joined by "/" (an extra "/"
// where a part already has one is harmless).
func (r *Reader) ReadFile(parts ...string) ([]byte, error) {
	fd, err := r.open(parts)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if r.buf == nil {
		r.buf = make([]byte, 0, 4096) // a page: what a control file is at most, nearly always
	}
	r.buf = r.buf[:0]
	for {
		if len(r.buf) == cap(r.buf) {
			r.buf = append(r.buf, 0)[:len(r.buf)]
		}
		n, err := unix.Read(fd, r.buf[len(r.buf):cap(r.buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: r.pathString(), Err: err}
		}
		if n == 0 {
			return r.buf, nil
		}
		r.buf = r.buf[:len(r.buf)+n]
	}
}

// Readlink returns the target of the symbolic link whose path is parts joined by "/".
func (r *Reader) Readlink(parts ...string) ([]byte, error) {
	r.setPath(parts)
	if r.buf == nil {
		r.buf = make([]byte, 0, 4096)
	}
	for {
		r.buf = r.buf[:cap(r.buf)]
		n, err := r.pathCall(unix.SYS_READLINKAT, uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)))
		if err != nil {
			return nil, &fs.PathError{Op: "readlink", Path: r.pathString(), Err: err}
		}
		if int(n) < len(r.buf) {
			return r.buf[:n], nil
		}
		r.buf = append(r.buf, 0) // the target may be cut: grow and read again
	}
}

// Subdirs calls fn with the name of each subdirectory of the directory whose path is parts
// joined by "/", in the order the kernel lists them. name is valid only during the call, and fn
// must not use the Reader. Entries that are not directories cost nothing: a container's cgroup
// directory has dozens of control files, and a walk of the tree lists every directory.
func (r *Reader) Subdirs(fn func(name []byte) error, parts ...string) error {
	fd, err := r.openFlags(parts, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if cap(r.buf) < direntBufferSize {
		r.buf = make([]byte, 0, direntBufferSize)
	}
	for {
		n, err := unix.Getdents(fd, r.buf[:cap(r.buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "getdents", Path: r.pathString(), Err: err}
		}
		if n <= 0 {
			return nil
		}
		for b := r.buf[:n]; len(b) >= direntNameOffset; {
			reclen := int(binary.NativeEndian.Uint16(b[direntReclenOffset:]))
			if reclen < direntNameOffset || reclen > len(b) {
				return &fs.PathError{Op: "getdents", Path: r.pathString(), Err: unix.EBADMSG}
			}
			entry := b[:reclen]
			b = b[reclen:]
			name := entry[direntNameOffset:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if string(name) == "." || string(name) == ".." {
				continue
			}
			isDir := entry[direntTypeOffset] == unix.DT_DIR
			if entry[direntTypeOffset] == unix.DT_UNKNOWN { // a filesystem without d_type
				var st unix.Stat_t
				isDir = unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
			}
			if !isDir {
				continue
			}
			if err := fn(name); err != nil {
				return err
			}
		}
	}
}

// linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), d_name (NUL-terminated).
const (
	direntReclenOffset = 16
	direntTypeOffset   = 18
	direntNameOffset   = 19
	direntBufferSize   = 32 << 10
)

func (r *Reader) open(parts []string) (int, error) {
	return r.openFlags(parts, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY)
}

func (r *Reader) openFlags(parts []string, flags uintptr) (int, error) {
	r.setPath(parts)
	fd, err := r.pathCall(unix.SYS_OPENAT, flags, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: r.pathString(), Err: err}
	}
	return int(fd), nil
}

// atFDCWD makes paths absolute or relative to the working directory. A variable: the constant
// (-100) cannot be converted to a system call's uintptr argument at compile time.
var atFDCWD = unix.AT_FDCWD

// pathCall makes the system call trap(AT_FDCWD, path, a3, a4) on the NUL-terminated path in
// r.path, retried on EINTR. It is called directly, not through unix.Open or unix.Readlink,
// because those take the path as a string and copy it for the kernel at each call.
func (r *Reader) pathCall(trap, a3, a4 uintptr) (uintptr, error) {
	for {
		v, _, errno := unix.Syscall6(trap, uintptr(atFDCWD), uintptr(unsafe.Pointer(&r.path[0])), a3, a4, 0, 0)
		switch errno {
		case 0:
			return v, nil
		case unix.EINTR:
		default:
			return 0, errno
		}
	}
}

func (r *Reader) setPath(parts []string) {
	r.path = r.path[:0]
	for i, p := range parts {
		if i > 0 {
			r.path = append(r.path, '/')
		}
		r.path = append(r.path, p...)
	}
	r.path = append(r.path, 0)
}

// pathString is the path being read, for an error message (which is the only place it is
// allocated as a string).
func (r *Reader) pathString() string { return string(r.path[:len(r.path)-1]) }
