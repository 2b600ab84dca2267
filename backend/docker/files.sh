# The docker backend's session file helper (sessionfiles.go says why it is
# one), run in the container as the sandbox user:
#
#   sh -c "$(cat files.sh)" execbox OP ARG LAST DIRS...
#
# It enters DIRS one at a time from /work (creating missing ones for put
# and mkdir) and does OP on LAST ("" for the work dir itself, in stat and
# list). Exit status: 0 done, 3 a symlink or a non-directory on the way
# (path_invalid), 4 not there (file_not_found), 5 not a regular file
# (not_a_file), 6 not a directory (not_a_dir), 7 a command failed (its
# stderr says why), 8 the file size limit, 10 put's content did not
# arrive whole (nothing was written), 11 permission denied. A directory
# the program removes while the helper is in it is 4 too.
#
#   stat   ARG unused: prints TYPE|SIZE|MODE|MTIME NUL (find -printf)
#   list   ARG unused: prints TYPE|SIZE|MODE|MTIME|NAME NUL per entry
#   get    ARG is max+1: copies at most that many bytes to stdout
#   put    ARG names the temporary file; stdin is a token line, the
#          content, then the token again: only then is the file renamed
#          into place (a cut stream leaves nothing, not a torn file)
#   mkdir, remove: ARG unused
#   clean  ARG names a temporary file of put to remove
#
# put's temporary file is named $tmp followed by ARG.
tmp=.execbox-put-
umask 022
op=$1 x=$2 f=$3
shift 3
cd -P /work || exit 7
p=$PWD mk=0
case $op in put | mkdir) mk=1 ;; esac
step() {
	if [ -L "./$1" ]; then exit 3; fi
	if [ ! -e "./$1" ]; then
		[ $mk = 1 ] || exit 4
		if ! mkdir -- "./$1"; then
			[ -L "./$1" ] && exit 3
			[ -e "./$1" ] || exit 7
		fi
	fi
	{ [ -d "./$1" ] && [ ! -L "./$1" ]; } || exit 3
	[ -x "./$1" ] || exit 11
	cd -P -- "./$1" || exit 3
	[ "$PWD" = "$p/$1" ] || exit 3
	p=$PWD
}
for d; do step "$d"; done
case $op in
stat)
	if [ -z "$f" ]; then f=.; else f=./$f; fi
	[ -e "$f" ] || [ -L "$f" ] || exit 4
	find "$f" -maxdepth 0 -printf '%y|%s|%m|%T@\0' || exit 7
	;;
list)
	if [ -n "$f" ]; then
		[ -L "./$f" ] && exit 3
		[ -e "./$f" ] || exit 4
		[ -d "./$f" ] || exit 6
		step "$f"
	fi
	[ -r . ] || exit 11
	find . -mindepth 1 -maxdepth 1 -ignore_readdir_race -printf '%y|%s|%m|%T@|%P\0' || exit 7
	;;
get)
	[ -L "./$f" ] && exit 5
	[ -e "./$f" ] || exit 4
	[ -f "./$f" ] || exit 5
	dd if="./$f" iflag=nofollow,nonblock,count_bytes count="$x" bs=64K status=none || exit 7
	;;
put)
	t=./$tmp$x
	[ -L "./$f" ] && exit 3
	[ -e "./$f" ] && [ ! -f "./$f" ] && exit 5
	IFS= read -r k || exit 10
	[ ${#k} = 32 ] || exit 10
	dd of="$t" conv=excl bs=64K status=none
	r=$?
	if [ $r != 0 ]; then
		rm -f -- "$t"
		[ $r = 153 ] && exit 8
		exit 7
	fi
	if ! { s=$(stat -c %s -- "$t") && [ "$s" -ge 32 ] && [ "$(tail -c 32 -- "$t")" = "$k" ]; }; then
		[ -e "$t" ] || exit 4
		rm -f -- "$t"
		exit 10
	fi
	truncate -s $((s - 32)) -- "$t" || { rm -f -- "$t"; exit 7; }
	if [ -L "./$f" ]; then rm -f -- "$t"; exit 3; fi
	if [ -e "./$f" ] && [ ! -f "./$f" ]; then rm -f -- "$t"; exit 5; fi
	mv -fT -- "$t" "./$f" || { rm -f -- "$t"; exit 7; }
	;;
mkdir)
	[ -L "./$f" ] && exit 3
	if [ ! -e "./$f" ]; then
		mkdir -- "./$f" && exit 0
		[ -L "./$f" ] && exit 3
		[ -e "./$f" ] || exit 7
	fi
	[ -d "./$f" ] || exit 6
	;;
remove)
	[ -e "./$f" ] || [ -L "./$f" ] || exit 4
	rm -rf -- "./$f" || exit 7
	;;
clean)
	rm -f -- "./$tmp$x"
	;;
*)
	exit 7
	;;
esac
