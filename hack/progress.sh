#!/usr/bin/env bash
# Runs a long command so that it is never silent for long: while it runs, a
# line every 15 s says what is running and for how long, and how far it got.
#
#   hack/progress.sh [-p TOTAL | -d | -t TOTAL] LABEL -- COMMAND [ARG...]
#
#   -p TOTAL  COMMAND is a `go build -v`: count the package names it prints
#             (instead of printing them) and report "N of up to TOTAL
#             packages compiled" (packages found in the build cache are
#             neither compiled nor printed).
#   -d        COMMAND downloads Go modules: count its "go: downloading"
#             lines (instead of printing them) and report "N modules".
#   -t TOTAL  COMMAND is a `go test` of TOTAL packages: count the ok/FAIL/?
#             lines and report "N/TOTAL packages done".
#
# Everything COMMAND prints (stdout and stderr together) goes to stdout,
# except what is counted instead; the heartbeat goes to stderr. The exit
# status is COMMAND's. The heartbeat is a plain line (no cursor control
# codes), so it reads the same in a terminal, a log file and CI.
set -uo pipefail

mode="" total=0
while getopts "p:dt:" opt; do
	case $opt in
	p) mode=packages total=$OPTARG ;;
	d) mode=downloads ;;
	t) mode=tests total=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
usage="usage: hack/progress.sh [-p N | -d | -t N] LABEL -- COMMAND..."
label=${1:?$usage}
shift
[[ "${1:-}" == -- ]] && shift
(($#)) || { echo "$usage" >&2; exit 2; }

# The interval between heartbeats; PROGRESS_INTERVAL is for this script's
# own test.
interval=${PROGRESS_INTERVAL:-15}
tick=$'\x01progress-tick'
done_mark=$'\x01progress-exit'

duration() { # seconds -> 1m05s
	local s=$1
	if ((s >= 60)); then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

now() { echo "${EPOCHSECONDS:-$(date +%s)}"; }

start=$(now)
{
	# The ticker writes into the same pipe as the command, so one reader sees
	# output and time in order. Short sleeps that don't hold the pipe: once
	# the ticker is killed, its last sleep neither delays the reader's EOF
	# nor outlives it by long.
	(while sleep 1 >/dev/null; do echo "$tick"; done) &
	ticker=$!
	"$@" 2>&1
	rc=$?
	kill "$ticker" 2>/dev/null
	wait "$ticker" 2>/dev/null
	echo "$done_mark $rc"
} | {
	count=0 rc=1 last=$start
	while IFS= read -r line; do
		case $line in
		"$tick")
			# A heartbeat once nothing has been printed for an interval;
			# in a counting mode the counted lines are not printed.
			t=$(now)
			((t - last >= interval)) || continue
			msg="$label: $(duration $((t - start))) elapsed"
			case $mode in
			packages) msg+=", $count of up to $total packages compiled" ;;
			downloads) msg+=", $count modules downloaded" ;;
			tests) msg+=", $count/$total packages done" ;;
			esac
			echo "$msg" >&2
			last=$t
			;;
		"$done_mark "*)
			rc=${line#"$done_mark "}
			;;
		*)
			if [[ $mode == packages && $line =~ ^[A-Za-z0-9._~/+-]+$ ]] ||
				[[ $mode == downloads && $line == "go: downloading "* ]]; then
				count=$((count + 1))
				continue
			fi
			if [[ $mode == tests && $line =~ ^(ok|FAIL|\?)[[:space:]] ]]; then
				count=$((count + 1))
			fi
			printf '%s\n' "$line"
			last=$(now)
			;;
		esac
	done
	exit "$rc"
}
