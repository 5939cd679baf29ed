#!/bin/sh
# A shell script that launches the Python program, as a job script does: the hook must
# reach the Python process through the shell.
echo "run.sh: starting"
"${PYTHON:-python}" "$(dirname "$0")/compile_crash.py"
status=$?
echo "run.sh: the program exited with $status"
exit $status
