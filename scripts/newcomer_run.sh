#!/usr/bin/env bash
# A newcomer's first hour on an HTML manual, as the README's "Your own documents" says:
# ingest the folder, list and count it, search it, ask it a question it answers and one it
# does not, ask again in the terminal UI (driven in tmux) and over HTTP (curl), and hang up
# on a streamed answer to see the request logged as 499 and the next one served.
#
#   apt-get install -y debian-reference-en tmux curl
#   bash scripts/newcomer_run.sh /usr/share/debian-reference build/newcomer
#
# Every step's command and output go to OUT/NN-step.txt (the TUI's screens and the ingest's
# progress frames as tmux shows them on a 120x36 terminal). CRAG_EDGE names the command
# (default `crag-edge`; from a checkout: CRAG_EDGE="python -m crag_edge.cli"), PORT the
# service's port (default 8089). Its output, read and trimmed: docs/newcomer-run.md.
set -euo pipefail
MANUAL=${1:?usage: newcomer_run.sh MANUAL_DIR OUT_DIR}
OUT=${2:?usage: newcomer_run.sh MANUAL_DIR OUT_DIR}
CRAG=${CRAG_EDGE:-crag-edge}
PORT=${PORT:-8089}
DB=$OUT/manual.db
SESSION=newcomer-$$
# A tmux server of its own: its panes get this shell's environment and folder.
tm() { tmux -L "$SESSION" "$@"; }
ANSWERED="Where are the encrypted passwords of the users stored?"
UNANSWERED="What is the capital of Australia?"
TUI_QUESTION="How do I reconfigure the locales?"
mkdir -p "$OUT"
rm -f "$DB" "$DB"-wal "$DB"-shm "$OUT"/*.txt "$OUT"/serve.log

# Run one step: its command line, output and wall time go to OUT/NAME.txt and the terminal.
step() {
    local name=$1
    shift
    local start=$SECONDS
    {
        printf '$'
        printf ' %q' "$@"
        echo
        "$@" 2>&1 || echo "(exit $?)"
        echo "[$((SECONDS - start)) s]"
    } | tee "$OUT/$name.txt"
}

# Poll a tmux pane until its screen matches a pattern or the time runs out (then say so).
wait_for_screen() {
    local pattern=$1 limit=$2 start=$SECONDS
    until tm capture-pane -p -t "$SESSION" | grep -qE "$pattern"; do
        if ((SECONDS - start > limit)); then
            echo "(not seen within $limit s: $pattern)"
            return 0
        fi
        sleep 2
    done
}

# The ingest in a real terminal, its progress frames captured every 5 s: the index page
# (the table of contents), the language picker and the same manual as PDF and text left out.
ingest_in_terminal() {
    local start=$SECONDS
    tm new-session -d -c "$PWD" -s "$SESSION" -x 120 -y 36
    tm send-keys -t "$SESSION" "$CRAG ingest --db $DB $MANUAL --exclude index.html \
--exclude index.en.html --exclude '*.pdf' --exclude '*.txt.gz'; echo INGEST-\"\"DONE" Enter
    : >"$OUT/01-ingest-frames.txt"
    until tm capture-pane -p -t "$SESSION" | grep -q '^INGEST-DONE'; do
        sleep 5
        echo "--- at $((SECONDS - start)) s" >>"$OUT/01-ingest-frames.txt"
        tm capture-pane -p -t "$SESSION" | grep -v '^$' | tail -4 >>"$OUT/01-ingest-frames.txt"
    done
    tm capture-pane -p -J -S - -t "$SESSION" | grep -v '^$' >"$OUT/01-ingest.txt"
    echo "[$((SECONDS - start)) s]" >>"$OUT/01-ingest.txt"
    tm kill-session -t "$SESSION"
}

# The TUI: ask a question, wait for the answer's end (a tick or a cross on the stage line).
tui_question() {
    local start=$SECONDS
    tm new-session -d -c "$PWD" -s "$SESSION" -x 120 -y 36 "$CRAG tui --db $DB"
    wait_for_screen 'Answer' 180
    tm send-keys -t "$SESSION" "$TUI_QUESTION" Enter
    sleep 5
    tm capture-pane -p -t "$SESSION" >"$OUT/09-tui-working.txt"
    wait_for_screen '(✓|✗) answer' 900
    sleep 2
    {
        echo "[$((SECONDS - start)) s]"
        tm capture-pane -p -t "$SESSION"
    } >"$OUT/10-tui-done.txt"
    tm send-keys -t "$SESSION" C-q
    sleep 2
    tm kill-session -t "$SESSION" 2>/dev/null || true
}

post() { curl -sS -N -H 'Content-Type: application/json' "http://127.0.0.1:$PORT$1" -d "$2"; }

# The service: search, a streamed answer, a client that leaves, and the request after it.
http_session() {
    $CRAG serve --db "$DB" --port "$PORT" >"$OUT/serve.log" 2>&1 &
    local server=$! start=$SECONDS
    until curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null; do
        if ((SECONDS - start > 300)); then break; fi
        sleep 2
    done
    echo "ready after $((SECONDS - start)) s" >"$OUT/11-serve-start.txt"
    step 12-http-search post /v1/search '{"question": "sticky bit", "top_k": 3}'
    step 13-http-answer post /v1/answer "{\"question\": \"$UNANSWERED\"}"
    step 14-http-hangup curl -sS -N --max-time 20 -H 'Content-Type: application/json' \
        "http://127.0.0.1:$PORT/v1/answer" -d "{\"question\": \"$ANSWERED\"}"
    sleep 3
    step 15-http-after-hangup post /v1/answer "{\"question\": \"$UNANSWERED\"}"
    curl -sS "http://127.0.0.1:$PORT/metrics" | grep 'requests_total.*v1/answer' >"$OUT/16-metrics.txt"
    kill "$server"
    wait "$server" || true
}

ingest_in_terminal
step 02-documents $CRAG documents --db "$DB"
step 03-stats $CRAG stats --db "$DB"
step 04-search-sticky $CRAG search --db "$DB" "sticky bit"
step 05-search-locales $CRAG search --db "$DB" "reconfigure locales"
step 06-search-shadow $CRAG search --db "$DB" "encrypted password file"
step 07-answer-in-manual $CRAG answer --db "$DB" "$ANSWERED"
step 08-answer-not-in-manual $CRAG answer --db "$DB" "$UNANSWERED"
tui_question
http_session
