#!/usr/bin/env bash
# Shows the progress of a Ninja build whose output comes on stdin (Ninja
# writes one `[finished/total] ...` line per step when its stdout is not a
# terminal; NINJA_STATUS must stay '[%f/%t] '), so that a first build, which
# takes minutes, is never silent: on a terminal one line, rewritten in place;
# otherwise (a log, CI) a plain line every TRACEML_PROGRESS_EVERY_S seconds
# (default 20), not one per file. Any other line (a compiler's error, apt's
# output) is passed on. The first argument names the build in those lines.
set -uo pipefail
label="${1:-build}"
every="${TRACEML_PROGRESS_EVERY_S:-20}"
tty=0
if [ -t 1 ]; then tty=1; fi
status_re='^\[([0-9]+)/([0-9]+)\] '
start=$SECONDS
last=$SECONDS
finished=""
total=""
elapsed() {
  local s=$((SECONDS - start))
  printf '%d:%02d' $((s / 60)) $((s % 60))
}
while IFS= read -r line; do
  if [[ $line =~ $status_re ]]; then
    # Ninja's first line, "[0/2] Re-checking globbed directories...",
    # comes before every build, one with nothing to do included.
    if [ "${BASH_REMATCH[1]}" = 0 ]; then continue; fi
    finished=${BASH_REMATCH[1]}
    total=${BASH_REMATCH[2]}
    if [ "$tty" = 1 ]; then
      printf '\r\033[K%s: building %s/%s, %s' "$label" "$finished" "$total" "$(elapsed)"
    elif ((SECONDS - last >= every)); then
      printf '%s: building %s/%s, %s\n' "$label" "$finished" "$total" "$(elapsed)"
      last=$SECONDS
    fi
    continue
  fi
  # A build with nothing to do says nothing.
  case $line in
    "ninja: no work to do." | "install-deps: all "*" packages present") continue ;;
  esac
  if [ "$tty" = 1 ] && [ -n "$finished" ]; then printf '\r\033[K'; fi
  printf '%s\n' "$line"
done
if [ -n "$finished" ]; then
  if [ "$tty" = 1 ]; then printf '\r\033[K'; fi
  printf '%s: built %s/%s in %s\n' "$label" "$finished" "$total" "$(elapsed)"
fi
