#!/bin/sh
# An ioa exec worker in POSIX sh: no bash, no jq.
#
# The exec adapter writes the task as one line of JSON on stdin and takes
# what this prints on stdout as the result (plain text here). A non-zero
# exit fails the task, with stderr as the reason.
#
# This one counts the words of the text between double or single quotes in
# the task (all of the task when there are none).
set -eu

task=$(cat)
# The value of "task_desc": a JSON string, escapes included. The key appears
# once: inside string values every quote is escaped.
desc=$(printf '%s\n' "$task" | sed -n 's/.*"task_desc":"\([^"\\]*\(\\.[^"\\]*\)*\)".*/\1/p')
if [ -z "$desc" ]; then
	echo "no task_desc in the task" >&2
	exit 1
fi
# Later paragraphs carry earlier results; escaped quotes become quotes
# (other escapes stay as they are: this is a sketch, not a JSON parser).
desc=$(printf '%s\n' "$desc" | sed 's/\\n\\n.*//; s/\\"/"/g')
case $desc in
*\"*\"*)
	text=${desc#*\"}
	text=${text%%\"*}
	;;
*\'*\'*)
	text=${desc#*\'}
	text=${text%%\'*}
	;;
*) text=$desc ;;
esac
words=$(printf '%s\n' "$text" | wc -w | tr -d ' ')
printf "'%s' has %s words\n" "$text" "$words"
