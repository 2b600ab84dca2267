package gvisor

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The log of runsc's run and boot commands (--debug-log, info level, no
// debug logging) is what execbox learns from about a run:
//
//   - "Exiting with status: <raw wait status>", logged by each of them as
//     it ends: the program's real wait status (runsc's own exit code folds
//     a signal into 128+n);
//   - the sentry's strace of the fork family (--strace-syscalls=clone,
//     clone3,fork,vfork), whose exit lines say when a fork failed with
//     EAGAIN: the sentry's RLIMIT_NPROC, Limits.Pids, was reached. Nothing
//     on the host sees that limit otherwise.
//
// The log is a FIFO read while runsc runs, never a file: a program that
// forks in a loop makes the sentry log without end, and none of it may
// land on the host's disk. Only the facts above are kept.

// stracedSyscalls are the syscalls the sentry logs: the ones that make
// a task, which RLIMIT_NPROC refuses with EAGAIN.
const stracedSyscalls = "clone,clone3,fork,vfork"

var (
	// glog: "I1129 19:32:20.959458   20397 main.go:266] Exiting with status: 15",
	// the third field being the process id.
	statusLine = regexp.MustCompile(`^I\d{4} [0-9:.]+ +(\d+) [\w.]+:\d+\] Exiting with status: (\d+)$`)
	// "I1201 07:51:10.177870   10293 strace.go:611] [   1:   1] python3 X clone(…) = 0 (0x0) errno=11 (try again) (21.72µs)"
	forkFailedLine = regexp.MustCompile(`^I\d{4} [0-9:.]+ +\d+ strace\.go:\d+\] \[ *\d+: *\d+\] .* X (clone3?|v?fork)\(.*\) = [^()]*(\(0x[0-9a-f]+\) )?errno=11 \([^()]*\) \([^()]*\)$`)
)

// tailLines is how many of the log's last lines are kept.
const tailLines = 20

// runLog reads one run's log from the FIFO at its path.
type runLog struct {
	f    *os.File
	end  string // the line that ends the log, written by Close
	done chan struct{}

	// After done is closed:
	statuses   []logStatus
	forkFailed int      // forks the sentry refused with EAGAIN
	fellBack   bool     // runsc waited on the sandbox process instead of the container
	tail       []string // the last lines other than strace's, for a sandbox error's message
	err        error
}

type logStatus struct {
	pid int
	ws  syscall.WaitStatus
}

// openRunLog opens the FIFO (read and write, so that it neither blocks
// before runsc opens it nor ends when runsc closes it) and starts reading.
func openRunLog(path string) (*runLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening runsc's log: %w", err)
	}
	var b [16]byte
	rand.Read(b[:])
	l := &runLog{f: f, end: "execbox: end of log " + hex.EncodeToString(b[:]), done: make(chan struct{})}
	go l.read()
	return l, nil
}

// Close ends the log and waits until everything written before it has
// been read. Call it once no runsc process of the run is left.
func (l *runLog) Close() error {
	// The reader drains the FIFO, so the write does not wait; the deadline
	// is for a reader that failed.
	l.f.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, werr := io.WriteString(l.f, "\n"+l.end+"\n")
	if werr == nil {
		<-l.done
	}
	return errors.Join(werr, l.f.Close())
}

func (l *runLog) read() {
	defer close(l.done)
	r := bufio.NewReaderSize(l.f, 64*1024)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer is none of ours: skip it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil {
				l.err = err
				return
			}
			continue
		}
		if err != nil {
			l.err = err
			return
		}
		s := string(line[:len(line)-1])
		if s == l.end {
			return
		}
		l.parse(s)
	}
}

// parse keeps what line says about the run.
func (l *runLog) parse(line string) {
	if m := statusLine.FindStringSubmatch(line); m != nil {
		pid, _ := strconv.Atoi(m[1])
		if n, err := strconv.ParseUint(m[2], 10, 32); err == nil {
			l.statuses = append(l.statuses, logStatus{pid, syscall.WaitStatus(n)})
		}
		return
	}
	if forkFailedLine.MatchString(line) {
		l.forkFailed++
		return
	}
	if strings.Contains(line, "Will try waiting on the sandbox process") {
		l.fellBack = true
	}
	if line != "" && !strings.Contains(line, " strace.go:") {
		if len(l.tail) == tailLines {
			l.tail = l.tail[1:]
		}
		l.tail = append(l.tail, line)
	}
}

// status is the program's wait status: the boot process's (the sentry's)
// line is preferred over that of the run command (process runPID), which
// falls back to the sentry's own exit code, folding a signal into 128+n,
// when the sentry exits before runsc's wait on it is answered. ok is false
// when neither logged one: runsc itself failed.
func (l *runLog) status(runPID int) (ws syscall.WaitStatus, ok bool) {
	fromBoot := false
	for _, s := range l.statuses {
		boot := s.pid != runPID
		if !ok || boot || !fromBoot {
			ws, ok, fromBoot = s.ws, true, boot
		}
	}
	return ws, ok
}
