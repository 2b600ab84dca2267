package docker

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"strconv"
	"strings"
	"sync"
)

// keeper is every container's PID 1 (`/bin/sh -c keeper execbox-keeper
// WRAPPER`), with the container's stdin attached to execbox for the
// container's whole life. It reads one command per line:
//
//	r TOKEN N ARGS...   kill what an earlier run may have left, then run
//	                    ARGS (shell words: env assignments, then
//	                    /bin/sh -c "$w" execbox DIR PROGRAM ARGS...) with
//	                    the next N bytes of stdin as its standard input,
//	                    after one line holding TOKEN
//	k TOKEN             kill every process but itself, then say so with
//	                    the trailer "TOKEN k" on stdout and stderr
//	q TOKEN             the same, then exit: the container stops
//
// and on end of file — execbox closed the sandbox, or died: the engine
// closes a container's stdin (StdinOnce) when the attach that holds it ends
// — it kills everything and exits, so the container stops and the engine
// removes it (AutoRemove). That is the backstop: a container outlives its
// execbox only as long as the engine takes to notice the closed attach.
//
// Every byte of an inline stdin is read, whatever happens to its file in
// /tmp: what was left would be read as commands. A run's stderr goes to
// the wrapper as fd 7 while the keeper's own stderr for that command is
// /dev/null: a shell says on its stderr how a foreground job died, and the
// wrapper's kill at the end of a run may catch setsid's parent before it
// exited ("Killed" would land in the program's stderr).
//
// A run is started with `setsid -f`: the wrapper is then the keeper's child
// (adopted), so the keeper reaps it and every orphan, while its signal
// dispositions are the defaults (an asynchronous list of a non-interactive
// shell would ignore SIGINT and SIGQUIT). Without a setsid that has -f
// (busybox's has not) it falls back to an asynchronous list. The keeper
// keeps reading while a run runs, so a kill needs no new process (a fork
// bomb at the pids limit cannot stop it). SIGCHLD interrupts its read, and
// `jobs` then reaps every zombie (orphans included) at once; a partly read
// line is kept. Nothing inside the container can kill PID 1: the kernel
// drops signals to a namespace's init that it does not handle, and the
// only one it handles, SIGCHLD, only makes it reap.
const keeper = `w=$1 c=0 b= N='
'
set -C
trap ': $((c=c+1)); jobs >/dev/null' CHLD
s=
setsid -f /bin/true </dev/null >/dev/null 2>&1 && s=1
while :; do
	c0=$c
	if IFS= read -r l; then
		l=$b$l b=
	else
		[ "$c" = "$c0" ] && break
		b=$b$l
		continue
	fi
	case $l in
	'r '*)
		command eval "set -- ${l#r }" || continue
		kill -9 -1 2>/dev/null
		t=$1 i=
		shift
		if [ "$1" -gt 0 ] 2>/dev/null; then
			i=/tmp/.execbox-in-$t o=
			if { printf '%s\n' "$t" >"$i"; } 2>/dev/null; then
				head -c "$1" | { cat >>"$i" 2>/dev/null || { cat >/dev/null; false; }; } && o=1
			else
				head -c "$1" >/dev/null
			fi
			if [ -z "$o" ]; then
				rm -f "$i"
				printf '\036execbox-%s\n' "$t"
				printf '\036execbox-%s err=stdin\n' "$t" >&2
				continue
			fi
		fi
		shift
		if [ -n "$i" ]; then
			exec 6<"$i"
			rm -f "$i"
		else
			exec 6<<E
$t
E
		fi
		if [ -n "$s" ]; then
			setsid -f /usr/bin/env -i -- "$@" <&6 6<&- 7>&2 2>/dev/null
		else
			/usr/bin/env -i -- "$@" <&6 6<&- 7>&2 2>/dev/null &
		fi
		exec 6<&-
		;;
	[kq]' '*)
		kill -9 -1 2>/dev/null
		kill -9 -1 2>/dev/null
		# Confirm only once the tree is gone (reaped: the CHLD trap), so
		# Close and a kill return only when no process of it remains.
		p=/sys/fs/cgroup/pids/pids.current
		[ -r $p ] || p=/sys/fs/cgroup/pids.current
		j=0
		while [ -r $p ] && read -r r <$p && [ "$r" -gt 1 ] && [ $j -lt 2000 ]; do
			j=$((j+1))
			kill -9 -1 2>/dev/null
			jobs >/dev/null
		done
		printf '\036execbox-%s k\n' "${l#? }"
		printf '\036execbox-%s k\n' "${l#? }" >&2
		case $l in q*) exit 0 ;; esac
		;;
	esac
done
kill -9 -1 2>/dev/null
kill -9 -1 2>/dev/null`

// wrapper is the shell every program runs under, through the keeper or
// through an exec, as
//
//	env -i -- VARS... /bin/sh -c wrapper execbox DIR PROGRAM ARGS...
//
// with a line holding the run's token first on its stdin and the program's
// stdin after it (the token is never in an argument or the environment,
// where the program could read it), and, through the keeper, its stderr as
// fd 7. env -i drops the image's own ENV. It
// checks the directory and the program (127 not found, 126 not
// executable, as a shell reports them), reads the container's cgroup
// counters, runs the program, kills the program's whole tree — every
// process but PID 1 and itself, which is what kill -1 means inside a PID
// namespace — waits (briefly, without a new process) until the keeper
// reaped them, so that the next program finds all of its pids free, reads
// the counters again and ends with a trailer on each stream:
// "\036execbox-TOKEN" on stdout, and "\036execbox-TOKEN FIELDS" on stderr,
// where FIELDS is
//
//	x=STATUS sig=0|1 work=0|1 [cpu=NS peak=BYTES oom=N pmax=N]   it ran
//	err=dir|notfound|noexec                                      it did not start
//
// (and the keeper says err=stdin when the stdin did not fit in /tmp).
//
// The program runs in a command substitution through one more sh that
// applies its redirections and execs it: the substitution's own shell
// waits for it with its stderr captured, and a shell says how a foreground
// job died there ("Killed") when a signal other than SIGINT or SIGPIPE
// ended it. So sig=1 tells a signal (STATUS is then 128+N) from an exit
// status above 128 (x=- when the substitution's shell was killed before it
// could say: the status is lost). work says whether /work holds anything
// after the run
// (so that Artifacts need not ask the engine when it does not). cpu is the
// cgroup's CPU time during the run, peak the cgroup's peak memory so far,
// oom the OOM kills and pmax the refused forks (the pids limit) during the
// run.
const wrapper = `{ true >&7; } 2>/dev/null && exec 2>&7 7>&-
IFS= read -r t
d=$1
shift
n='
'
v() { r=0; [ -r "$1" ] && read -r r _ <"$1"; }
f() { r=0; [ -r "$1" ] || return 0; while read -r a z; do [ "$a" = "$2" ] && r=$z; done <"$1"; }
g() {
	c=/sys/fs/cgroup
	if [ -r $c/cpuacct/cpuacct.usage ]; then
		v $c/cpuacct/cpuacct.usage; u=$r
		v $c/memory/memory.max_usage_in_bytes; m=$r
		f $c/memory/memory.oom_control oom_kill; o=$r
		f $c/pids/pids.events max; q=$r
	elif [ -r $c/cpu.stat ]; then
		f $c/cpu.stat usage_usec; u=${r}000
		v $c/memory.peak; m=$r
		f $c/memory.events oom_kill; o=$r
		f $c/pids.events max; q=$r
	else
		u=-
	fi
}
e() {
	printf '\036execbox-%s\n' "$t"
	printf '\036execbox-%s %s\n' "$t" "$*" >&2
	exit 0
}
cd -- "$d" 2>/dev/null || e err=dir
case $1 in
*/*) p=$1 ;;
*) p=$(command -v -- "$1") || e err=notfound ;;
esac
case $p in
*/*)
	[ -e "$p" ] || e err=notfound
	{ [ -f "$p" ] && [ -x "$p" ]; } || e err=noexec
	;;
esac
g
u0=$u o0=$o q0=$q
exec 3>&1 4>&2
R=$(exec 2>&1; /bin/sh -c 'unset PWD OLDPWD; exec "$@" >&3 2>&4 3>&- 4>&-' sh "$@"; echo "$?")
kill -9 -1 2>/dev/null
kill -9 -1 2>/dev/null
exec 3>&- 4>&-
for c in /sys/fs/cgroup/pids/pids.current /sys/fs/cgroup/pids.current; do
	[ -r $c ] || continue
	read -r u _ </proc/uptime
	# Centiseconds, leading zeros dropped: under gVisor the uptime is
	# "0.069", and $((0069)) is a malformed octal number.
	i=${u%.*}${u#*.} i=${i#"${i%%[!0]*}"}
	i=$((${i:-0}+100))
	while read -r r <$c && [ "$r" -gt 2 ]; do
		read -r u _ </proc/uptime
		[ "${u%.*}${u#*.}" -lt $i ] || break
	done
	break
done
s=${R##*"$n"} k=0
[ "$R" = "$s" ] || k=1
case $s in '' | *[!0-9]*) s=- k=0 ;; esac
w=1
if [ -r /work ] && [ -x /work ]; then
	w=0
	for x in /work/* /work/.[!.]* /work/..?*; do
		if [ -e "$x" ] || [ -L "$x" ]; then w=1; break; fi
	done
fi
g
[ "$u" = - ] && e x=$s sig=$k work=$w
e x=$s sig=$k work=$w cpu=$((u-u0)) peak=$m oom=$((o-o0)) pmax=$((q-q0))`

// ownPids are the processes execbox itself keeps in a container while a
// program runs: the keeper, the wrapper and the wrapper's command
// substitution. The pids limit adds them, so that the program's own live
// tasks (processes and threads) are exactly Limits.Pids at most.
const ownPids = 3

func token() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// shellQuote quotes s as one word for the keeper's `eval "set -- …"`,
// keeping the command on one line: inside single quotes, with ' written as
// '\” and a newline as '"$N"' (the keeper's N holds a newline).
func shellQuote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch r {
		case '\'':
			b.WriteString(`'\''`)
		case '\n':
			b.WriteString(`'"$N"'`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// trailer is what the wrapper (or, after a kill, the keeper) said at the
// end of a run.
type trailer struct {
	killed   bool // the keeper's "k": the run was killed by execbox
	err      string
	work     int // 1: /work holds something after the run; 0: empty; -1: not said
	status   int
	signaled bool
	counted  bool // the cgroup counters below were read
	cpuNS    int64
	peak     int64
	oom      int64
	pidsMax  int64
}

// parseTrailer reads the FIELDS of a stderr trailer.
func parseTrailer(body string) (trailer, bool) {
	tr := trailer{work: -1}
	body = strings.TrimSpace(body)
	if body == "k" {
		tr.killed = true
		return tr, true
	}
	seen := false
	for _, f := range strings.Fields(body) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return tr, false
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "err":
			tr.err = v
			seen = true
		case "x":
			tr.status = int(n)
			if v == "-" {
				tr.status = -1
			}
			seen = true
		case "sig":
			tr.signaled = v == "1"
		case "work":
			tr.work = int(n)
		case "cpu":
			tr.cpuNS, tr.counted = n, true
		case "peak":
			tr.peak = n
		case "oom":
			tr.oom = n
		case "pmax":
			tr.pidsMax = n
		}
	}
	return tr, seen
}

// filter passes a run's output stream through to out, minus the trailers
// of token: "\036execbox-TOKEN" followed by a body up to a newline. It
// holds back a tail that may be the start of a trailer until it knows.
type filter struct {
	mu     sync.Mutex
	marker []byte
	out    io.Writer
	held   []byte
	inside bool     // after a marker, before its newline
	bodies []string // the trailers' bodies, in order
	notify func()   // called after each trailer
}

// maxTrailer bounds a trailer's body; a longer one is not a trailer.
const maxTrailer = 512

func newFilter(tok string, out io.Writer, notify func()) *filter {
	return &filter{marker: []byte("\036execbox-" + tok), out: out, notify: notify}
}

func (f *filter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = append(f.held, p...)
	for {
		if f.inside {
			i := bytes.IndexByte(f.held, '\n')
			if i < 0 {
				if len(f.held) > maxTrailer {
					// Not ours after all: pass it on.
					f.inside = false
					f.out.Write(f.marker)
					continue
				}
				return len(p), nil
			}
			f.bodies = append(f.bodies, string(f.held[:i]))
			f.held = f.held[i+1:]
			f.inside = false
			if f.notify != nil {
				f.notify()
			}
			continue
		}
		if i := bytes.Index(f.held, f.marker); i >= 0 {
			f.out.Write(f.held[:i])
			f.held = f.held[i+len(f.marker):]
			f.inside = true
			continue
		}
		keep := partial(f.held, f.marker)
		f.out.Write(f.held[:len(f.held)-keep])
		f.held = append(f.held[:0], f.held[len(f.held)-keep:]...)
		return len(p), nil
	}
}

// partial is the length of the longest suffix of b that is a proper
// prefix of m.
func partial(b, m []byte) int {
	for n := min(len(b), len(m)-1); n > 0; n-- {
		if bytes.HasSuffix(b, m[:n]) {
			return n
		}
	}
	return 0
}

// flush passes on what is still held (a stream that ended without its
// trailer) and returns the trailers' bodies.
func (f *filter) flush() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inside {
		f.out.Write(f.marker)
		f.inside = false
	}
	if len(f.held) > 0 {
		f.out.Write(f.held)
		f.held = nil
	}
	return f.bodies
}

// seen returns the trailers' bodies so far.
func (f *filter) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}
