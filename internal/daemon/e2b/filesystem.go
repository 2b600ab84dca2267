package e2b

import "time"

// The filesystem.Filesystem service of the sandbox daemon.
const (
	FilesystemService = "/filesystem.Filesystem/"
	FilesystemStat    = FilesystemService + "Stat"
	FilesystemMakeDir = FilesystemService + "MakeDir"
	FilesystemMove    = FilesystemService + "Move"
	FilesystemListDir = FilesystemService + "ListDir"
	FilesystemRemove  = FilesystemService + "Remove"
	FilesystemWatch   = FilesystemService + "WatchDir"
	// The polled watchers.
	FilesystemCreateWatcher    = FilesystemService + "CreateWatcher"
	FilesystemGetWatcherEvents = FilesystemService + "GetWatcherEvents"
	FilesystemRemoveWatcher    = FilesystemService + "RemoveWatcher"
)

// File types of EntryInfo.Type.
const (
	FileTypeFile      = "FILE_TYPE_FILE"
	FileTypeDirectory = "FILE_TYPE_DIRECTORY"
	FileTypeSymlink   = "FILE_TYPE_SYMLINK"
)

// Event types of a FilesystemEvent.
const (
	EventCreate = "EVENT_TYPE_CREATE"
	EventWrite  = "EVENT_TYPE_WRITE"
	EventRemove = "EVENT_TYPE_REMOVE"
	EventRename = "EVENT_TYPE_RENAME"
	EventChmod  = "EVENT_TYPE_CHMOD"
)

// PathRequest is the request of Stat, MakeDir and Remove.
type PathRequest struct {
	Path string `json:"path"`
}

// ListDirRequest lists a directory, depth levels down (1: its entries).
type ListDirRequest struct {
	Path  string `json:"path"`
	Depth uint32 `json:"depth"`
}

// MoveRequest renames an entry.
type MoveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// EntryInfo describes an entry of the sandbox's filesystem.
type EntryInfo struct {
	Name         string    `json:"name"`
	Type         string    `json:"type"`
	Path         string    `json:"path"`
	Size         int64     `json:"size,string"`
	Mode         uint32    `json:"mode"`
	Permissions  string    `json:"permissions"`
	Owner        string    `json:"owner"`
	Group        string    `json:"group"`
	ModifiedTime time.Time `json:"modifiedTime"`
}

// EntryResponse is the answer of Stat, MakeDir and Move.
type EntryResponse struct {
	Entry EntryInfo `json:"entry"`
}

// ListDirResponse lists entries.
type ListDirResponse struct {
	Entries []EntryInfo `json:"entries"`
}

// WatchDirRequest watches a directory (WatchDir, CreateWatcher).
type WatchDirRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

// FilesystemEvent is one change seen by a watch.
type FilesystemEvent struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// WatchDirResponse is one message of a watch's stream: exactly one field
// is set.
type WatchDirResponse struct {
	Start      *Empty           `json:"start,omitempty"`
	Filesystem *FilesystemEvent `json:"filesystem,omitempty"`
	Keepalive  *Empty           `json:"keepalive,omitempty"`
}

// WatcherRequest names a polled watcher.
type WatcherRequest struct {
	WatcherID string `json:"watcherId"`
}

// WatcherEvents are the changes a polled watcher saw since it was last
// asked.
type WatcherEvents struct {
	Events []FilesystemEvent `json:"events"`
}

// WrittenFile is one file of the answer of POST /files.
type WrittenFile struct {
	Name string `json:"name"`
	Type string `json:"type"` // "file"
	Path string `json:"path"`
}
