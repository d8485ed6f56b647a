# Sourced by the recipes with a dry run (scripts/reproduce_looped.sh, pilot_state_tracking_depth.sh,
# pilot_indirect_indexing_lr.sh): their multiruns, summaries and, with DRY=1, the commands and
# the estimate instead of the runs.
#   sweep <train.py -m arguments…>   runs `python train.py -m …` (a failure is kept in $status,
#                                    the sweep's report lists it; the other multiruns go on;
#                                    a sweep stopped by SIGINT/SIGTERM, 130/143, stops the recipe);
#                                    DRY=1: prints the command and keeps its jobs for the estimate
#   summarize <sweep dir>            scripts/summarize_tasks.sh (the tables, verdict classes and
#                                    figures); DRY=1: prints the command
#   finish                           DRY=1: every kept job's estimate and their total, the line
#                                    the sweeper prints before its first run (scripts/sweep_plan.py);
#                                    then exits with $status
# Nothing is written under DRY=1 and nothing trains (the estimate builds models on the meta device).
python=${PYTHON:-.venv/bin/python}
status=0
planned=()
shown() {  # the arguments as a shell would take them back: quoted only where a character needs it
    local argument line=$1; shift
    for argument in "$@"; do
        if [[ $argument =~ ^[A-Za-z0-9_./=,:+@-]+$ ]]; then
            line+=" $argument"
        else
            line+=" '${argument//\'/\'\\\'\'}'"
        fi
    done
    echo "$line"
}
sweep() {
    if [[ -n ${DRY:-} ]]; then
        shown "+ python train.py -m" "$@"
        planned+=(-- "$@")
    else
        "$python" train.py -m "$@" || status=$?
        if ((status == 130 || status == 143)); then  # stopped by a signal: the recipe stops too
            echo "recipe: stopped (train.py exited $status); run the same command again to continue" >&2
            exit "$status"
        fi
    fi
}
summarize() {
    if [[ -n ${DRY:-} ]]; then
        shown "+ bash scripts/summarize_tasks.sh" "$1"
    else
        bash scripts/summarize_tasks.sh "$1" || status=$?
    fi
}
finish() {
    if [[ -n ${DRY:-} ]]; then
        "$python" scripts/sweep_plan.py --each "${planned[@]}" || status=$?
    fi
    exit "$status"
}
