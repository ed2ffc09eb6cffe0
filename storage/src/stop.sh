# poddebug stop script: run as `sh -c SCRIPT poddebug-stop GRACE RECORD MESSAGE_PATH` inside the
# debug container. RECORD (one line) is appended to MESSAGE_PATH, the container's termination
# message file, before any signal is sent, so that the kubelet reports it once the container
# has terminated; an empty RECORD writes nothing.
# It signals exactly the processes that share this shell's mount namespace (the debug
# container's own processes), never this shell or its ancestors, never anything else: the
# target container and the pod's other containers have mount namespaces of their own.
# Exit codes: 0 signals sent; 3 the container's main process is PID 1 of its own PID namespace
# and is still running; 4 nothing to signal; 5 /proc unusable.
# A second stop running at the same time is in the same mount namespace and would signal this
# shell: ignore TERM (and the terminal's HUP/INT) so that only its SIGKILL phase can end us.
trap '' TERM HUP INT
grace=${1:-10}
case $grace in '' | *[!0-9]*) grace=10 ;; esac
self=$$
me=/proc/$self/ns/mnt
if [ ! -e "$me" ]; then
  echo "poddebug-stop: noproc: /proc is not mounted in this container" >&2
  exit 5
fi
# Same mount namespace: compare the namespace inodes with test -ef (no fork), or the links.
if [ "$me" -ef "$me" ] 2>/dev/null; then
  same_ns() { [ "$1" -ef "$me" ]; }
else
  myns=$(readlink "$me" 2>/dev/null)
  if [ -z "$myns" ]; then
    echo "poddebug-stop: noproc: cannot read $me" >&2
    exit 5
  fi
  same_ns() { [ "$(readlink "$1" 2>/dev/null)" = "$myns" ]; }
fi
# field PID KEY: the value of KEY (e.g. PPid:, State:) in /proc/PID/status, or empty.
field() {
  val=
  { while read -r k v rest; do
      if [ "$k" = "$2" ]; then val=$v; break; fi
    done; } 2>/dev/null <"/proc/$1/status"
}
# alive PID: the process exists and is not a zombie.
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  field "$1" State:
  case $val in Z* | X* | x*) return 1 ;; esac
  return 0
}
# This shell and its ancestors are never signalled.
skip=" $self "
p=$self
while :; do
  field "$p" PPid:
  case $val in '' | *[!0-9]*) break ;; esac
  [ "$val" -gt 0 ] || break
  case $skip in *" $val "*) break ;; esac
  skip="$skip$val "
  p=$val
done
# collect: the PIDs of the other processes of this mount namespace, into $found.
collect() {
  found=
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    case $pid in '' | *[!0-9]*) continue ;; esac
    case $skip in *" $pid "*) continue ;; esac
    same_ns "$d/ns/mnt" || continue
    found="$found $pid"
  done
}
collect
targets=$found
if [ -z "$targets" ]; then
  echo "poddebug-stop: none: found no process of this debug container to signal" >&2
  exit 4
fi
own_init=0
case "$targets " in *" 1 "*) own_init=1 ;; esac
# The record goes first: a failure to write it is said, and the stop goes on.
if [ -n "$2" ]; then
  if ! { printf '%s\n' "$2" >>"${3:-/dev/termination-log}"; } 2>/dev/null; then
    echo "poddebug-stop: norecord: cannot append to ${3:-/dev/termination-log}" >&2
  fi
fi
echo "poddebug-stop: term:$targets"
for pid in $targets; do kill -TERM "$pid" 2>/dev/null; done
waited=0
while [ "$waited" -lt "$grace" ]; do
  left=
  for pid in $targets; do
    if alive "$pid"; then left=1; break; fi
  done
  [ -n "$left" ] || break
  sleep 1
  waited=$((waited + 1))
done
# SIGKILL whatever is left, including processes started during the grace period. PID 1 of a
# PID namespace cannot be killed from inside it, so it is not tried.
collect
killed=
for pid in $found; do
  [ "$pid" = 1 ] && continue
  if alive "$pid"; then
    kill -KILL "$pid" 2>/dev/null && killed="$killed $pid"
  fi
done
[ -z "$killed" ] || echo "poddebug-stop: kill:$killed"
if [ "$own_init" = 1 ]; then
  # When PID 1 exits the kernel ends this shell too: getting past this loop means it runs on.
  n=0
  while [ "$n" -lt 2 ] && alive 1; do
    sleep 1
    n=$((n + 1))
  done
  if alive 1; then
    echo "poddebug-stop: pid1: the main process is PID 1 of the container's own PID namespace and ignores signals sent from inside it" >&2
    exit 3
  fi
fi
exit 0
