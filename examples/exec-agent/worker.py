#!/usr/bin/env python3
"""An ioa exec worker in Python, standard library only.

The exec adapter runs this program once per task: the task arrives as JSON on
stdin (task_id, assignee, task_abstract, task_desc, comm_id, goal_id, goal,
async, attempt, team_up_depth, earlier), and whatever the program prints on
stdout is the result: plain text, or {"conclusion": "..."}, or {"error": "..."}
to fail the task. A non-zero exit fails the task too (stderr is reported).

This one computes descriptive statistics of the numbers in the task.
"""
import json
import re
import statistics
import sys


def main() -> int:
    task = json.load(sys.stdin)
    text = task.get("task_desc") or task.get("task_abstract") or ""
    text = text.split("\n\n", 1)[0]  # later paragraphs carry earlier results
    # "3,200" is three thousand two hundred; "3, 5" two numbers.
    numbers = [float(n.replace(",", "")) for n in re.findall(r"-?\d+(?:,\d{3})*(?:\.\d+)?", text)]
    if not numbers:
        json.dump({"error": "no numbers in the task"}, sys.stdout)
        return 0
    parts = [
        f"n={len(numbers)}",
        f"mean={statistics.fmean(numbers):g}",
        f"median={statistics.median(numbers):g}",
    ]
    if len(numbers) > 1:
        parts.append(f"stdev={statistics.stdev(numbers):.4g}")
    json.dump({"conclusion": "statistics: " + ", ".join(parts)}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
