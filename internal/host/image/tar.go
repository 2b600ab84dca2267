package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// write emits the entries in path order, parents first.
func (b *builder) write(w io.Writer) (Stats, error) {
	var st Stats
	paths := make([]string, 0, len(b.entries))
	for p := range b.entries {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, func(x, y string) int { return slices.Compare(splitPath(x), splitPath(y)) })
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	for _, p := range paths {
		e := b.entries[p]
		mtime := e.mtime
		if mtime.IsZero() {
			mtime = epoch
		}
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), ModTime: mtime, Uid: e.uid, Gid: e.uid}
		h.Mode = int64(e.mode.Perm())
		if e.mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000 // never setuid or setgid
		}
		switch e.typ {
		case typeDir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			st.Dirs++
		case typeLink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.target
			st.Symlinks++
		case typeFile:
			h.Typeflag, h.Size = tar.TypeReg, e.size
			st.Files++
			st.Bytes += e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			return st, fmt.Errorf("writing %s: %w", p, err)
		}
		if e.typ != typeFile {
			continue
		}
		if err := copyContent(tw, e); err != nil {
			return st, fmt.Errorf("writing %s: %w", p, err)
		}
	}
	for m := range b.missing {
		st.Missing = append(st.Missing, m)
	}
	slices.Sort(st.Missing)
	return st, tw.Close()
}

func copyContent(w io.Writer, e *entry) error {
	if e.data != nil {
		_, err := io.Copy(w, bytes.NewReader(e.data))
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.CopyN(w, f, e.size)
	if err != nil {
		return fmt.Errorf("file changed while being read (%d of %d bytes): %w", n, e.size, err)
	}
	return nil
}
